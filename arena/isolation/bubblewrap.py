"""The jail every piece of submission-controlled code runs in: bubblewrap (`bwrap`), a maintained sandbox tool
(Flatpak's), plus util-linux's `setpriv` and `prlimit` (docs/integrity.md, "The sandbox").

Used by arena/isolation/jail.py (the worker: import, calls, its load_inline builds) and arena/compile/build.py (the nvcc
builds of `eval.py compile`). `command()` wraps an argv so that it runs:
- as a uid/gid of its own that owns nothing on the host (as root; a user without root keeps its own uid
  inside a user namespace of its own),
- in its own PID, IPC, network, UTS and cgroup namespaces: it can neither see nor signal the evaluator,
  another evaluation or any host process, and reaches no network service,
- on a read-only view of the host's files, except its own home (and folders a test names); a tmpfs over
  every folder the jail's user could not enter anyway (root's home, say), with only what Python, the CUDA
  toolkit and the evaluator need bound back read-only,
- with a minimal /dev (null, zero, full, random, urandom, tty, a private pts) plus the NVIDIA driver's shared
  nodes and the node of the evaluation's own GPU (arena/isolation/gpu_nodes.py: no other GPU of the host exists for it),
  and private tmpfs /tmp and /dev/shm of bounded size,
- with no capabilities and no new privileges, limits on memory, processes and open files,
- dying with the evaluator (bubblewrap's --die-with-parent; the PID namespace ends with its first process).

Only the standard library: imported before torch.
"""
from __future__ import annotations

import atexit
import hashlib
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass

from arena.isolation import gpu_nodes

BWRAP_ENV = "ARENA_BWRAP"             # path of a bwrap binary, for machines where it is not on PATH
UID_BASE = 1_500_000_000              # jail uids: far above any host account, one per submission
TMPFS_BYTES = 1 << 30                 # /tmp and /dev/shm inside the jail, each
OPEN_FILES = 4096
PROCESSES = 4096                      # threads count too: torch and nvcc start many


@dataclass(frozen=True)
class Limits:
    """Resource limits of one jailed process tree (prlimit). `memory_bytes` bounds the data segment
    (RLIMIT_DATA: private writable memory), which CUDA's large address-space reservations do not count in."""
    memory_bytes: int
    processes: int = PROCESSES
    open_files: int = OPEN_FILES


def find_bwrap() -> str | None:
    path = os.environ.get(BWRAP_ENV) or shutil.which("bwrap")
    return path if path and os.access(path, os.X_OK) else None


def jail_uid(key: str) -> int:
    """A uid of the jail's own for `key` (the submission's digest): no account of the host has it."""
    uid = UID_BASE + int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) % 500_000_000
    while _account_exists(uid):
        uid += 1
    return uid


def _account_exists(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
        return True
    except KeyError:
        return False


PASSWD_PREFIX = "arena-passwd-"      # <tmp>/arena-passwd-<the evaluator's pid>-<random>/passwd


def remove_stale_passwd_folders() -> None:
    """The passwd folders of evaluators that are gone: atexit removes a folder, but not when its evaluator was
    killed. Only this user's, only those whose pid no longer runs (a reused pid keeps its folder a while longer)."""
    base = tempfile.gettempdir()
    try:
        names = os.listdir(base)
    except OSError:
        return
    for name in names:
        if not name.startswith(PASSWD_PREFIX):
            continue
        pid = name[len(PASSWD_PREFIX):].split("-", 1)[0]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        path = os.path.join(base, name)
        try:
            if os.lstat(path).st_uid != os.getuid():
                continue
        except OSError:
            continue
        shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:         # alive, another user's
        return True
    return True


def passwd_file(uid: int, home: str) -> str:
    """A world-readable copy of the host's /etc/passwd with an account for the jail's uid, bound over /etc/passwd in
    the jail: torch.compile, Triton and getpass.getuser() look the user up (a public CuTe DSL submission failed at
    import with "getpwuid(): uid not found")."""
    remove_stale_passwd_folders()
    folder = tempfile.mkdtemp(prefix=f"{PASSWD_PREFIX}{os.getpid()}-")
    atexit.register(shutil.rmtree, folder, True)
    os.chmod(folder, 0o755)
    try:
        with open("/etc/passwd", encoding="utf-8", errors="replace") as f:
            host = f.read()
    except OSError:
        host = ""
    path = os.path.join(folder, "passwd")
    with open(path, "w", encoding="utf-8") as f:
        f.write(host + ("" if host.endswith("\n") or not host else "\n") +
                f"jail:x:{uid}:{uid}:nvfp4-arena jail:{home}:/usr/sbin/nologin\n")
    os.chmod(path, 0o644)
    return path


def default_limits() -> Limits:
    """Memory: 85 % of the machine's RAM less what the evaluator holds, so a runaway submission meets its own
    MemoryError instead of the OOM killer ending the evaluator."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        total = 16 << 30
    return Limits(memory_bytes=int(total * 0.85))


def _untraversable_roots(paths: list[str]) -> list[str]:
    """For each path, its outermost ancestor that others may not enter (no o+x): what needs a tmpfs so that
    the path, bound back, is reachable by the jail's user."""
    roots = set()
    for path in paths:
        parts = os.path.realpath(path).split(os.sep)
        for i in range(2, len(parts)):
            ancestor = os.sep.join(parts[:i])
            try:
                mode = os.stat(ancestor).st_mode
            except OSError:
                break
            if not mode & 0o001:
                roots.add(ancestor)
                break
    return sorted(roots, key=lambda p: p.count(os.sep))


def _listening_socket_files() -> list[str]:
    """Unix socket files some host process listens on (a Ray cluster's raylet, dbus, a container daemon):
    covered with /dev/null in the jail, so no service acts for it with its own rights."""
    found = set()
    try:
        with open("/proc/net/unix") as table:
            next(table, None)
            for line in table:
                fields = line.split()
                if len(fields) >= 8 and int(fields[3], 16) & 0x10000 and fields[7].startswith("/"):
                    found.add(fields[7])
    except OSError:
        pass
    return sorted(p for p in found if os.path.exists(p) and not p.startswith(("/tmp/", "/dev/")))


def _others_may_read(folder: str, limit: int = 2000) -> bool:
    """Whether a user of no group may enter `folder` and read its files (the first `limit` entries)."""
    seen = 0
    for base, folders, files in os.walk(folder):
        if os.stat(base).st_mode & 0o005 != 0o005:
            return False
        for name in files:
            seen += 1
            try:
                if seen <= limit and not os.stat(os.path.join(base, name)).st_mode & 0o004:
                    return False
            except OSError:
                pass
        folders[:] = [f for f in folders if not f.startswith((".git", "__pycache__"))]
        if seen > limit:
            break
    return True


def private_copy(folder: str, uid: int, max_bytes: int = 256 << 20) -> str:
    """A copy of `folder` that only the jail's uid may read, kept under <tmp>/nvfp4-arena-copies (a folder
    others may pass through but not list) and reused while its files' names, sizes and times are unchanged.
    Only the evaluator writes it; the jail binds it read-only. Another evaluation (another uid) cannot read it."""
    entries, total = [], 0
    skip = (".git", "__pycache__", ".pytest_cache", ".tools", ".whl", "out")
    for base, folders, files in os.walk(folder):
        folders[:] = sorted(f for f in folders if f not in skip)
        for name in sorted(files):
            st = os.stat(os.path.join(base, name))
            total += st.st_size
            entries.append(f"{os.path.relpath(os.path.join(base, name), folder)}:{st.st_size}:{st.st_mtime_ns}")
    if total > max_bytes:
        raise OSError(f"{folder} is not readable by the jail's user and too large to copy "
                      f"({total >> 20} MiB): make it readable by others (chmod -R o+rX)")
    digest = hashlib.sha256(("\n".join([folder, str(uid), *entries])).encode()).hexdigest()[:24]
    base_folder = os.path.join(tempfile.gettempdir(), "nvfp4-arena-copies")
    os.makedirs(base_folder, mode=0o711, exist_ok=True)
    os.chmod(base_folder, 0o711)
    copy = os.path.join(base_folder, digest)
    if not os.path.isdir(copy):
        partial = tempfile.mkdtemp(dir=base_folder)
        shutil.copytree(folder, os.path.join(partial, "tree"), symlinks=True,
                        ignore=shutil.ignore_patterns(*skip))
        for base, folders, files in os.walk(partial):
            for name in folders + files:
                path = os.path.join(base, name)
                if os.path.islink(path):
                    continue
                executable = os.path.isdir(path) or os.stat(path).st_mode & 0o100
                os.chown(path, uid, uid)
                os.chmod(path, 0o500 if executable else 0o400)
        try:
            os.rename(os.path.join(partial, "tree"), copy)
        except OSError:                  # another evaluation made the same copy meanwhile
            pass
        shutil.rmtree(partial, ignore_errors=True)
    return copy


def readable_paths(extra: list[str]) -> list[str]:
    """What a jailed Python with torch, nvcc and the evaluator must be able to read: the interpreter's
    prefixes and import path, PATH, the CUDA toolkit, plus `extra` (the checkout, the submission's folder)."""
    paths = [sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable))]
    paths += [p for p in sys.path if p and os.path.isdir(p)]
    paths += [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and os.path.isdir(p)]
    for var in ("CUDA_HOME", "CUDA_PATH", "CUTLASS_PATH"):
        if os.environ.get(var) and os.path.isdir(os.environ[var]):
            paths.append(os.environ[var])
    paths += [p for p in extra if p and os.path.exists(p)]
    kept: list[str] = []
    for path in sorted({os.path.realpath(p) for p in paths}):
        if not any(path.startswith(outer + os.sep) for outer in kept):      # inside one bound already
            kept.append(path)
    return kept


def command(argv: list[str], home: str, uid: int | None, limits: Limits, readable: list[str] = (),
            writable: list[str] = (), bwrap: str | None = None) -> list[str]:
    """`argv` wrapped to run jailed. `home` is bound read-write (and is the working folder); `uid` is the
    jail's user (root only: None keeps the caller's uid, in a user namespace); `readable` are made reachable
    read-only where an ancestor would hide them; `writable` are further folders bound read-write (tests)."""
    bwrap = bwrap or find_bwrap()
    if bwrap is None:
        raise FileNotFoundError("bubblewrap (bwrap) not found")
    jail = [bwrap, "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc", "--unshare-net",
            "--unshare-uts", "--unshare-cgroup-try", "--hostname", "jail",
            "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
            "--perms", "1777", "--size", str(TMPFS_BYTES), "--tmpfs", "/tmp",
            "--perms", "1777", "--size", str(TMPFS_BYTES), "--tmpfs", "/dev/shm"]
    if uid is None:
        jail += ["--unshare-user"]
    for node in gpu_nodes.jail_nodes():     # the driver's shared nodes and the evaluation's GPU, no other GPU
        jail += ["--dev-bind", node, node]
    paths = readable_paths(list(readable))
    # The evaluator's own folders (the checkout, the task, the submission's) that the jail's user may not
    # read (a runner's private work folder, mode 0700): a copy only the jail's uid may read is bound over them.
    source = {p: p for p in paths}
    if uid is not None:
        for path in readable:
            real = os.path.realpath(path)
            if real in source and os.path.isdir(real) and not _others_may_read(real):
                source[real] = private_copy(real, uid)
    # /tmp is the jail's own: whatever the evaluator needs from the host's /tmp is bound back.
    hidden = ["/tmp"] + [r for r in _untraversable_roots(paths + [home, *writable]) if not r.startswith("/tmp/")]
    for root in hidden:
        if root != "/tmp":
            jail += ["--perms", "0755", "--tmpfs", root]
    bound = set()
    for root in hidden:
        # bwrap would copy the host's modes for the folders it makes on the way: the jail's user must pass.
        for path, how in [(p, "--ro-bind") for p in paths] + [(p, "--bind") for p in (home, *writable)]:
            if path == root or path.startswith(root + os.sep):
                parts = path[len(root) + 1:].split(os.sep)[:-1] if path != root else []
                for i in range(1, len(parts) + 1):
                    jail += ["--perms", "0755", "--dir", os.path.join(root, *parts[:i])]
                if how == "--ro-bind" and path not in bound:
                    jail += [how, source[path], path]
                    bound.add(path)
    for path in paths:                  # copies of folders no ancestor hides
        if path not in bound and source[path] != path:
            jail += ["--ro-bind", source[path], path]
    for socket_file in _listening_socket_files():
        jail += ["--ro-bind", "/dev/null", socket_file]
    for folder in [home, *writable]:
        jail += ["--bind", folder, folder]
    if uid is not None:
        jail += ["--ro-bind", passwd_file(uid, home), "/etc/passwd"]
    jail += ["--chdir", home, "--"]
    limit = ["prlimit", f"--data={limits.memory_bytes}", f"--nproc={limits.processes}",
             f"--nofile={limits.open_files}", "--"]
    if uid is None:
        return jail + limit + argv
    drop = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs",
            "--inh-caps=-all", "--bounding-set=-all", "--"]
    return jail + limit + drop + argv


def check(bwrap: str | None, uid: int | None) -> str:
    """'' when a jailed `true` runs on this machine, else one line saying why not (bwrap missing, user
    namespaces refused, setpriv or prlimit missing)."""
    if bwrap is None:
        return ("bubblewrap (bwrap) not found: install it (apt-get install bubblewrap) or point "
                f"{BWRAP_ENV} at a bwrap binary")
    for tool in ("prlimit",) + (("setpriv",) if uid is not None else ()):
        if shutil.which(tool) is None:
            return f"{tool} (util-linux) not found"
    home = os.path.realpath("/tmp")
    argv = command(["true"], home, uid, Limits(1 << 30), bwrap=bwrap)
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as error:
        return f"bubblewrap could not start: {error}"
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        return f"bubblewrap could not start a jail: {said[:200]}"
    return ""
