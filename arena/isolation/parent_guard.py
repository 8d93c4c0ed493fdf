"""The evaluator's own defences (eval.py, arena/run/evaluation.py, arena/worker/spawn.py): non-dumpable and a child
subreaper (`harden_parent`), SIGTERM and SIGHUP turned into a clean stop on the path of Ctrl-C (`stop_on_signals`),
and, for tests, a record of every module imported once the worker exists (the parent imports nothing then: a
module planted where it would look could not run). Standard library only.
"""
from __future__ import annotations

import os
import signal
import sys

from arena.isolation.processes import PR_SET_CHILD_SUBREAPER, PR_SET_DUMPABLE, prctl

IMPORT_AUDIT_ENV = "ARENA_IMPORT_AUDIT"    # a file: list every module the parent imports after the worker starts


def harden_parent(sandboxed: bool) -> list[str]:
    """Non-dumpable (its /proc/<pid>/environ, mem and fd closed to others) and a child subreaper (orphaned
    descendants of the worker become its children, so the final sweep finds them)."""
    done = []
    if sandboxed and prctl(PR_SET_DUMPABLE, 0):
        done.append("parent non-dumpable")
    if prctl(PR_SET_CHILD_SUBREAPER, 1):
        done.append("parent subreaper")
    return done


class Terminated(BaseException):
    """SIGTERM or SIGHUP reached the evaluator: unwind like Ctrl-C, cleaning up on the way."""

    def __init__(self, signum: int):
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum


def stop_on_signals():
    def handler(signum, frame):
        raise Terminated(signum)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, handler)
    # A signal mask is inherited: a parent that blocked these (a test runner's thread, a library) would leave
    # Ctrl-C and SIGTERM pending for ever, and the run would never stop with the cases it finished
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP})


# ---- the parent imports nothing once the worker exists ------------------------------------------------------

_audit: dict = {}


def start_import_audit():
    """With ARENA_IMPORT_AUDIT=FILE, record every module imported after `worker_started()` (tests)."""
    path = os.environ.get(IMPORT_AUDIT_ENV)
    if not path or _audit:
        return
    _audit.update(path=path, started=False, late=[])

    def hook(event, args):
        if event == "import" and _audit["started"]:
            _audit["late"].append(str(args[0]))
    sys.addaudithook(hook)


def worker_started():
    if _audit:
        _audit["started"] = True


def write_import_audit():
    if _audit:
        with open(_audit["path"], "w") as f:
            f.write("\n".join(["worker-started"] * _audit["started"] + _audit["late"]) + "\n")
