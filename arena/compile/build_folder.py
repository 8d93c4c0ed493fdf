"""The submission's extension build folder (TORCH_EXTENSIONS_DIR), claimed for the evaluation's lifetime.

torch.utils.cpp_extension serializes builds of one extension with a `lock` file in its folder and waits, with no
time limit, while that file exists. An evaluation killed while building (a time limit, SIGKILL) leaves the file
behind, and every later evaluation of the same file then waits in silence until its own limit. The file holds no
owner, so staleness is told apart another way: each evaluator holds a shared flock on `.arena-evaluators` in the
folder while it runs (the kernel drops it when the process dies, however it dies). One that can take the lock
exclusively is the only live evaluator of the folder, and any `lock` there is stale. A live evaluator takes its
shared lock before it builds, so it can never hold a `lock` an exclusive holder would remove.
"""
from __future__ import annotations

import fcntl
import glob
import os

from arena.isolation.homes import BUILD_LOCK

MARKER = ".arena-evaluators"
_held: list[int] = []       # the descriptor stays open until the process ends: closing it would drop the lock


def claim(folder: str | None) -> list[str]:
    """Hold a shared lock on `folder` (created if missing) for this process's lifetime; when no other live
    evaluator holds one, first remove the build locks killed evaluations left there. Returns the removed paths."""
    if not folder:
        return []
    try:
        os.makedirs(folder, exist_ok=True)
        fd = os.open(os.path.join(folder, MARKER), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError:
        return []           # a folder this process cannot write: torch will say so when it builds
    removed = []
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        pass                # another live evaluation of this file: its locks are its own
    else:
        for stale in glob.glob(os.path.join(glob.escape(folder), "*", BUILD_LOCK)):
            try:
                os.remove(stale)
                removed.append(stale)
            except OSError:
                pass
    fcntl.flock(fd, fcntl.LOCK_SH)
    _held.append(fd)
    return removed
