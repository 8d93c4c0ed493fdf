"""Starting the worker process: `python -I -B` running arena.worker.server in its jail (arena/isolation/jail.py), one socket to it.

Free of torch, so the parent can start the worker before its own `import torch` and both imports run at once
(about 3.5 s each on the H100 machine). Until the parent's hello names the submission, only our code runs
in the worker: every module the parent imports meanwhile is still imported before any submission code runs.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
from dataclasses import dataclass

from arena.isolation import jail, worker_text
from arena.compile import cutlass_include_dirs
from arena.submission_file import SubmissionFile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclass
class Spawned:
    """A started worker process, waiting for the parent's hello."""
    process: subprocess.Popen
    sock: socket.socket                 # the parent's end of the channel
    isolation: jail.Isolation
    traps: list                         # its stdout and stderr, read by threads (worker_text.OutputTrap)


def with_cutlass_headers(env: dict) -> dict:
    """load_inline sources that include <cutlass/...> without naming an include path built on the
    competition's image; here CUTLASS comes from the nvidia-cutlass package (or CUTLASS_PATH), put on CPATH
    (gcc and nvcc read it) and CUTLASS_PATH (which some submissions read themselves)."""
    headers = cutlass_include_dirs()
    if headers:
        env["CPATH"] = os.pathsep.join(headers + ([env["CPATH"]] if env.get("CPATH") else []))
        env.setdefault("CUTLASS_PATH", os.path.dirname(headers[0]))
    return env


def worker_argv() -> list[str]:
    """`python -I` (no user site-packages, no PYTHON* variables, no script folder on the path: nothing in the
    worker's home runs at interpreter start), with the evaluator's folder put on the path by hand."""
    boot = f"import sys; sys.path.insert(0, {ROOT!r}); from arena.worker.server import main; main()"
    return [sys.executable, "-I", "-B", "-c", boot]


def spawn_worker(submission: SubmissionFile, sandboxed: bool, readable: list[str] = (),
                 probe_failed: str = "") -> Spawned:
    """Start the worker jailed unless `sandboxed` is off or CUDA failed in a jailed worker before
    (`probe_failed` says how). `readable`: folders it must read besides the evaluator's (the task's)."""
    isolation = jail.Isolation(submission, sandboxed and not probe_failed)
    if probe_failed:
        isolation.state = f"off: CUDA failed in the jailed worker ({probe_failed})"
        isolation.weak = isolation.state
    parent_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    env = with_cutlass_headers(isolation.environment())
    env[jail.NO_SANDBOX_ENV] = "0" if isolation.home else "1"
    env["ARENA_CHANNEL_FD"] = str(child_end.fileno())
    argv = isolation.wrap(worker_argv(), [ROOT, os.path.dirname(submission.path), *readable,
                                          *env.get("CPATH", "").split(os.pathsep)])
    process = subprocess.Popen(argv, env=env, pass_fds=(child_end.fileno(),), stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    child_end.close()
    return Spawned(process, parent_end, isolation,
                   [worker_text.OutputTrap(process.stdout), worker_text.OutputTrap(process.stderr)])
