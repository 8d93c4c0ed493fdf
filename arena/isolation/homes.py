"""The jailed worker's one writable folder, <tmp>/nvfp4-arena-homes/<digest> (arena/isolation/jail.py): made and
owned by the jail's uid, kept between runs of the same file so that its JIT builds survive, shared with no other
submission. A run holds a shared flock on <digest>.lock beside it; it tidies the home (everything but the build
cache, and lock files a killed build left there) only while it can hold that flock alone, so never under
another run's worker. The parent never follows a link the worker left: every walk is descriptor-relative.
Standard library only.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import stat
import tempfile

HOME_CACHE_LIMIT = 2 << 30      # bytes of build cache a home keeps between runs
BUILD_LOCK = "lock"     # torch's FileBaton (load_inline, load): a build holds the folder while this file exists


def _base() -> str:
    return os.path.join(tempfile.gettempdir(), "nvfp4-arena-homes")


def tidy_home(home: str) -> None:
    """Once no worker uses it: everything in a home but the build cache is removed, and the cache too when it
    holds more than HOME_CACHE_LIMIT bytes on disk, so a run leaves nothing else behind (a worker that filled
    its home kept the fill). Lock files a killed build left in the cache are removed: torch would wait for
    them for ever. Descriptor-relative, never following a link the worker left."""
    try:
        fd = os.open(home, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return
    try:
        for name in os.listdir(fd):
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            folder = stat.S_ISDIR(st.st_mode)
            if name == "cache" and folder and _clear_locks_and_measure(os.path.join(home, name)) <= HOME_CACHE_LIMIT:
                continue
            if folder:
                shutil.rmtree(os.path.join(home, name), ignore_errors=True)     # fd-based: links not followed
            else:
                os.unlink(name, dir_fd=fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _clear_locks_and_measure(folder: str) -> int:
    """Remove the build lock files under `folder` and return the bytes in use there (blocks: a sparse file counts
    what it holds), in one descriptor-relative walk that never follows a link. Removing the locks first is
    right either way: a cache over the limit goes whole."""
    total = 0
    for _, _, names, dir_fd in os.fwalk(folder, follow_symlinks=False):
        for name in names:
            try:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                if name == BUILD_LOCK and stat.S_ISREG(st.st_mode):
                    os.unlink(name, dir_fd=dir_fd)
                else:
                    total += st.st_blocks * 512
            except OSError:
                pass
    return total


def private_home(digest: str, uid: int | None) -> str:
    """<tmp>/nvfp4-arena-homes/<digest>: the one folder the jailed worker may write, owned by its uid, kept
    between runs of the same file (its JIT builds survive) and shared with no other submission. The parent
    makes and owns the base folder and never looks inside a home: whatever the worker left there (links
    included) is never followed by the evaluator."""
    base = _base()
    os.makedirs(base, mode=0o700, exist_ok=True)
    st = os.lstat(base)
    if st.st_uid != os.geteuid() or not stat.S_ISDIR(st.st_mode):
        raise RuntimeError(f"{base} is not a folder of ours")
    os.chmod(base, 0o700, follow_symlinks=False)
    base_fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        try:
            os.mkdir(digest, 0o700, dir_fd=base_fd)
        except FileExistsError:
            pass
        st = os.stat(digest, dir_fd=base_fd, follow_symlinks=False)
        if not stat.S_ISDIR(st.st_mode):
            raise RuntimeError(f"{os.path.join(base, digest)} is not a folder")
        if uid is not None and (st.st_uid, st.st_gid) != (uid, uid):
            os.chown(digest, uid, uid, dir_fd=base_fd, follow_symlinks=False)
    finally:
        os.close(base_fd)
    return os.path.join(base, digest)


_claims: dict[str, int] = {}     # digest -> this process's descriptor of <digest>.lock


def claim_home(digest: str) -> int:
    """A shared flock on <tmp>/nvfp4-arena-homes/<digest>.lock, held for the run (closed with the process): a
    run tidies its home only when it can turn this exclusive, so never under another run's worker. One
    descriptor per file and process: every worker this run starts (a restart, a second spawn) shares it, so a
    run never blocks its own tidying."""
    if digest in _claims:
        return _claims[digest]
    base_fd = os.open(_base(), os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        fd = os.open(f"{digest}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                     dir_fd=base_fd)
    finally:
        os.close(base_fd)
    fcntl.flock(fd, fcntl.LOCK_SH)
    _claims[digest] = fd
    return fd
