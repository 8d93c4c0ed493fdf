"""This process's descendants and their end (arena/run/evaluation.py, arena/worker/client.py), and prctl.

The evaluator is a child subreaper, so the worker's orphans and session leaders come back to it: `end_all` walks
its descendants in SIGKILL rounds until none remain. It may also have had children before the evaluation began
that are not its to end: a shell that runs `python eval.py ... 2> >(tee log)` execs eval.py in a process whose
child is the `tee`. `note_bystanders()` records the processes below the evaluator when a run begins;
`end_started()` ends every other descendant, sparing the bystanders and whatever they start later.
Standard library only.
"""
from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 1, 4, 36


def prctl(*args) -> bool:
    """prctl(2) with up to five integer arguments; False where it failed or there is no libc (not Linux)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return False
    args = list(args) + [0] * (5 - len(args))
    return libc.prctl(*[ctypes.c_ulong(a) for a in args]) == 0


def die_with_parent() -> bool:
    """Be sent SIGKILL when the parent ends (PR_SET_PDEATHSIG)."""
    return prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _parents() -> dict[int, int]:
    """pid -> parent pid of every visible process."""
    found = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit():
            continue
        fields = _stat(int(entry))
        if len(fields) > 1:
            found[int(entry)] = int(fields[1])
    return found


def _stat(pid: int) -> list[str]:
    """/proc/<pid>/stat's fields after the command name (field 3 onwards: state, ppid, ...); [] when gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()     # the name may hold spaces and parentheses
    except OSError:
        return []


def descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid, ppid in _parents().items():
        children.setdefault(ppid, []).append(pid)
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def end_all(keep=(), deadline_s: float = 10.0) -> int:
    """Kill every descendant of this process except `keep`, in rounds until none remain (as a subreaper,
    orphans of the worker, session leaders included, are re-parented to us and found by the next round).
    Returns how many were killed."""
    me, killed, until = os.getpid(), 0, time.monotonic() + deadline_s
    while time.monotonic() < until:
        targets = [pid for pid in descendants(me) if pid not in keep]
        if not targets:
            return killed
        for pid in targets:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except (ProcessLookupError, PermissionError):
                pass
        _reap()
        time.sleep(0.005)
    return killed


def _reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


_bystanders: dict[int, str] = {}      # pid -> its start time (/proc/<pid>/stat field 22): a reused pid is no bystander


def _start_time(pid: int) -> str:
    fields = _stat(pid)
    return fields[19] if len(fields) > 19 else ""


def note_bystanders():
    """Record every process below this one now: the evaluation has started none of them."""
    _bystanders.clear()
    for pid in descendants(os.getpid()):
        _bystanders[pid] = _start_time(pid)


def spared() -> set[int]:
    """The bystanders still alive (the same process, not a reused pid) and everything below them."""
    alive = {pid for pid, started in _bystanders.items() if started and _start_time(pid) == started}
    below = {child for pid in alive for child in descendants(pid)}
    return alive | below


def end_started() -> int:
    """End every descendant the evaluation started (the worker, its children, their orphans); how many."""
    return end_all(keep=spared())
