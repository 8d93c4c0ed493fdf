"""Ending what an evaluation started, and nothing else (arena/run/evaluation.py, arena/worker/client.py).

The evaluator is a subreaper, so the worker's orphans come back to it; but it may also have had children
before the evaluation began that are not its to end: a shell that runs `python eval.py ... 2> >(tee log)`
execs eval.py in a process whose child is the `tee`. `note_bystanders()` records the processes below the
evaluator when a run begins; `end_started()` ends every other descendant (arena/isolation/sandbox.py `end_all`),
sparing the bystanders and whatever they start later.
"""
from __future__ import annotations

import os

from arena.isolation import sandbox

_bystanders: dict[int, str] = {}      # pid -> its start time (/proc/<pid>/stat field 22): a reused pid is no bystander


def _start_time(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[19]
    except (OSError, IndexError):
        return ""


def note_bystanders():
    """Record every process below this one now: the evaluation has started none of them."""
    _bystanders.clear()
    for pid in sandbox.descendants(os.getpid()):
        _bystanders[pid] = _start_time(pid)


def spared() -> set[int]:
    """The bystanders still alive (the same process, not a reused pid) and everything below them."""
    alive = {pid for pid, started in _bystanders.items() if started and _start_time(pid) == started}
    below = {child for pid in alive for child in sandbox.descendants(pid)}
    return alive | below


def end_started() -> int:
    """End every descendant the evaluation started (the worker, its children, their orphans); how many."""
    return sandbox.end_all(keep=spared())
