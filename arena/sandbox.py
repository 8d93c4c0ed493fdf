"""Process isolation for the untrusted worker (docs/integrity.md, "The sandbox").

The parent (eval.py, arena/runner.py) uses it to:
- keep secrets out of reach: `reexec_without_secrets` re-executes eval.py with POPCORN_SEED and `--seed`
  handed over through a pipe, so neither is in /proc/<pid>/environ or /proc/<pid>/cmdline;
- start the worker so that (as root) it sees every file system read-only, in a mount namespace of its own,
  except one private home per submission (its JIT builds survive between runs, shared with no other
  submission), and holds no capability: it can change none of the evaluator's files or caches, and cannot
  read the parent's memory, environment or descriptors;
- end every descendant by walking this process's descendants (it is a subreaper, so orphans and session
  leaders come back to it) in SIGKILL rounds until none remain;
- turn SIGTERM and SIGHUP into a clean stop (the same path as Ctrl-C);
- strip control characters from every text the worker produced, and cap how much of it is kept.

Module level imports only the standard library: eval.py calls it before torch is imported.
"""
from __future__ import annotations

import ctypes
import hashlib
import json
import os
import re
import signal
import stat
import sys
import tempfile
import threading
import time

SECRET_FD_ENV = "ARENA_SECRET_FD"
NO_SANDBOX_ENV = "ARENA_NO_SANDBOX"        # set to 1 by --no-sandbox (or under ncu): the worker runs as we do
IMPORT_AUDIT_ENV = "ARENA_IMPORT_AUDIT"    # a file: list every module the parent imports after the worker starts
OUTPUT_CAP = 64 << 10                      # bytes of the worker's stdout/stderr kept per case


# ---- secrets out of /proc ----------------------------------------------------------------------------------

def _strip_seed_option(argv: list[str]) -> tuple[list[str], str | None]:
    kept, seed, skip = [], None, False
    for i, arg in enumerate(argv):
        if skip:
            skip = False
            continue
        if arg == "--seed" and i + 1 < len(argv):
            seed, skip = argv[i + 1], True
        elif arg.startswith("--seed="):
            seed = arg.split("=", 1)[1]
        else:
            kept.append(arg)
    return kept, seed


def reexec_without_secrets():
    """If POPCORN_SEED is in the environment or --seed on the command line, re-exec this process without them,
    handing the values over through an inherited pipe. The same pid continues (the runner still waits for
    it); its /proc/<pid>/environ and cmdline hold no secret. Returns only when there is nothing to do."""
    if SECRET_FD_ENV in os.environ:
        return
    argv = list(getattr(sys, "orig_argv", None) or [sys.executable, *sys.argv])
    kept, cli_seed = _strip_seed_option(argv[1:])
    env_seed = os.environ.get("POPCORN_SEED")
    if env_seed is None and cli_seed is None:
        return
    read_end, write_end = os.pipe()
    os.write(write_end, json.dumps({"popcorn": env_seed, "cli": cli_seed}).encode())   # fits the pipe buffer
    os.close(write_end)
    os.set_inheritable(read_end, True)
    env = {k: v for k, v in os.environ.items() if k != "POPCORN_SEED"}
    env[SECRET_FD_ENV] = str(read_end)
    try:
        os.execve(sys.executable, [sys.executable, *kept], env)
    except OSError:                            # cannot re-exec: the values stay where they are
        os.close(read_end)


def take_handed_secrets() -> dict:
    """{"popcorn": POPCORN_SEED or None, "cli": the --seed value or None}, from the re-exec pipe (read and
    closed) or, without a re-exec, popped from the environment."""
    fd = os.environ.pop(SECRET_FD_ENV, None)
    found = {"popcorn": os.environ.pop("POPCORN_SEED", None), "cli": None}
    if fd is not None:
        try:
            chunks = []
            while chunk := os.read(int(fd), 4096):
                chunks.append(chunk)
            found.update(json.loads(b"".join(chunks).decode()))
        finally:
            try:
                os.close(int(fd))
            except OSError:
                pass
    return found


# ---- the parent's own hardening -------------------------------------------------------------------------

PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 1, 4, 36, 38


def _libc():
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def _prctl(libc, *args) -> bool:
    args = list(args) + [0] * (5 - len(args))
    return libc.prctl(*[ctypes.c_ulong(a) for a in args]) == 0


def harden_parent(sandboxed: bool) -> list[str]:
    """Non-dumpable (its /proc/<pid>/environ, mem and fd closed to others) and a child subreaper (orphaned
    descendants of the worker become its children, so the final sweep finds them)."""
    done = []
    libc = _libc() if sys.platform.startswith("linux") else None
    if libc is None:
        return done
    if sandboxed and _prctl(libc, PR_SET_DUMPABLE, 0):
        done.append("parent non-dumpable")
    if _prctl(libc, PR_SET_CHILD_SUBREAPER, 1):
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


# ---- the worker's view of the machine and its private folder ----------------------------------------------

CLONE_NEWNS, MS_REC, MS_PRIVATE, MS_BIND, MS_REMOUNT, MS_RDONLY = 0x20000, 0x4000, 1 << 18, 0x1000, 0x20, 0x1
CLONE_NEWNET, SO_ACCEPTCON = 0x40000000, 0x10000
SYS_MOUNT_SETATTR, MOUNT_ATTR_RDONLY, AT_RECURSIVE, AT_FDCWD = 442, 0x1, 0x8000, -100
PR_CAPBSET_DROP, PR_SET_SECUREBITS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 28, 47, 4
SECBITS_LOCKED_NOROOT = 0x2F     # NOROOT, NO_SETUID_FIXUP and KEEP_CAPS, each locked: exec gives no caps back
CAPABILITY_VERSION_3 = 0x20080522
HOME_ENV = "ARENA_WORKER_HOME"
WRITABLE_ENV = "ARENA_WORKER_WRITABLE"    # folders (os.pathsep-separated) the worker may write besides its home


class Isolation:
    """How the worker is started. `state` is one line for reports; `weak` says why the worker could harm a
    later run (leaderboard refuses to rank then, unless --no-sandbox)."""

    def __init__(self, submission: str, enabled: bool):
        self.home = None
        self.weak = ""
        if not enabled:
            self.state, self.weak = "off (--no-sandbox)", "the sandbox is off (--no-sandbox)"
        elif not sys.platform.startswith("linux"):
            self.state, self.weak = "off (not Linux)", "process isolation needs Linux"
        elif os.geteuid() != 0:
            self.state = "same user, no new privileges (not root: no read-only view of the files)"
            self.weak = "the evaluator is not root, so the worker can change files a later run reads"
        else:
            self.home = _private_home(submission)
            self.state = "starting"

    def environment(self, extra_path: str) -> dict:
        """The parent's environment without secrets or the runner's variables; caches in the private home."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("POPCORN_", "ARENA_")) and k not in ("PYTHONSTARTUP",)}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (extra_path, env.get("PYTHONPATH", "")) if p)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        if self.home:
            cache = os.path.join(self.home, "cache")
            env.update(HOME=self.home, TMPDIR=os.path.join(self.home, "tmp"), XDG_CACHE_HOME=cache,
                       TORCH_EXTENSIONS_DIR=os.path.join(cache, "torch_extensions"),
                       TRITON_CACHE_DIR=os.path.join(cache, "triton"), CUDA_CACHE_PATH=os.path.join(cache, "nv"))
            env[HOME_ENV] = self.home
            env[WRITABLE_ENV] = os.environ.get(WRITABLE_ENV, "")
        return env

    def worker_reported(self, state: str):
        """The worker's own account of its hardening, sent before any submission code ran."""
        self.state = state
        if not state.startswith("read-only"):
            self.weak = self.weak or f"the worker could not be isolated ({state})"


def _private_home(submission: str) -> str:
    """<tmp>/nvfp4-arena-workers/<hash of the submission>: the one folder the worker may write, kept between
    runs of the same file (its JIT builds survive) and shared with no other submission."""
    base = os.path.join(tempfile.gettempdir(), "nvfp4-arena-workers")
    os.makedirs(base, mode=0o700, exist_ok=True)
    st = os.lstat(base)
    if st.st_uid != os.geteuid() or os.path.islink(base) or not os.path.isdir(base):
        raise RuntimeError(f"{base} is not a folder of ours")
    os.chmod(base, 0o700)
    digest = hashlib.sha256(open(submission, "rb").read()).hexdigest()[:24]
    home = os.path.join(base, digest)
    for sub in ("", "tmp", "cache"):
        os.makedirs(os.path.join(home, sub), mode=0o700, exist_ok=True)
        os.chmod(os.path.join(home, sub), 0o700)
    return home


def harden_worker() -> str:
    """First thing in the worker, before torch or the submission: die with the parent, never gain privileges
    through exec, and (as root) see every file system read-only except the private home, with no capability
    left to change that. Returns one line saying what holds."""
    libc = _libc() if sys.platform.startswith("linux") else None
    if libc is None:
        return "off (no libc)"
    _prctl(libc, PR_SET_PDEATHSIG, signal.SIGKILL)
    _prctl(libc, PR_SET_NO_NEW_PRIVS, 1)
    if os.getppid() == 1:                      # the parent died before the death signal was armed
        os._exit(1)
    home = os.environ.pop(HOME_ENV, None)
    extra = [p for p in os.environ.pop(WRITABLE_ENV, "").split(os.pathsep) if p]
    if os.geteuid() != 0 or not home:
        return "off" if os.environ.get(NO_SANDBOX_ENV) == "1" else "same user, no new privileges"
    try:
        # /proc stays writable (CUDA fails to start without it; its files check access per process) but
        # not /proc/sys, which root could still write without capabilities.
        _read_only_view(libc, [home, "/dev/shm", "/proc"] + extra, read_only_again=["/proc/sys"],
                        masked=_listening_socket_files())
        _own_network(libc)
    except OSError as error:
        return f"failed: {error}"
    return _drop_capabilities(libc)


def _listening_socket_files() -> list[str]:
    """Every unix socket file some process of the host listens on (a Ray cluster's raylet, dbus, a container
    daemon): root without capabilities may still connect to one it owns, and the service behind it acts with
    its own rights. Read before the worker leaves the host's network namespace (/proc/net is per namespace)."""
    found = set()
    try:
        with open("/proc/net/unix") as table:
            next(table, None)
            for line in table:
                fields = line.split()
                if len(fields) >= 8 and int(fields[3], 16) & SO_ACCEPTCON and fields[7].startswith("/"):
                    found.add(fields[7])
    except OSError:
        pass
    return sorted(p for p in found if _is_socket(p))


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.lstat(path).st_mode)
    except OSError:
        return False


def _own_network(libc):
    """A network namespace of the worker's own: no interface but a loopback that is down, so no TCP or UDP
    service of the host (127.0.0.1 included) and no abstract unix socket is reachable. The channel to the
    parent is a socketpair made before, which stays connected."""
    if libc.unshare(CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), f"unshare(CLONE_NEWNET): {os.strerror(ctypes.get_errno())}")


def _read_only_view(libc, writable: list[str], read_only_again: list[str] = (), masked: list[str] = ()):
    """A mount namespace of the worker's own in which every mount is read-only except `writable` (bound onto
    themselves first, then made writable again), and every file in `masked` is /dev/null."""
    def check(ok: bool, what: str):
        if not ok:
            raise OSError(ctypes.get_errno(), f"{what}: {os.strerror(ctypes.get_errno())}")

    class MountAttr(ctypes.Structure):
        _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                    ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]

    def set_attr(path: bytes, flags: int, attr) -> bool:
        return libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, path, flags, ctypes.byref(attr), ctypes.sizeof(attr)) == 0

    check(libc.unshare(CLONE_NEWNS) == 0, "unshare(CLONE_NEWNS)")
    check(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) == 0, "making mounts private")
    # Outer folders first: a later bind of an outer folder would hide an inner one bound before it.
    paths = [p.encode() for p in sorted({os.path.realpath(p) for p in writable if os.path.isdir(p)},
                                        key=lambda p: p.count(os.sep))]
    for path in paths:
        check(libc.mount(path, path, None, MS_BIND | MS_REC, None) == 0, f"binding {path.decode()}")
    for path in (p.encode() for p in masked):
        check(libc.mount(b"/dev/null", path, None, MS_BIND, None) == 0, f"masking {path.decode()}")
    if set_attr(b"/", AT_RECURSIVE, MountAttr(MOUNT_ATTR_RDONLY, 0, 0, 0)):
        for path in paths:
            check(set_attr(path, 0, MountAttr(0, MOUNT_ATTR_RDONLY, 0, 0)), f"making {path.decode()} writable")
    else:                                       # kernels before 5.12: one remount per mount point
        for point in _mount_points():
            if point.encode() not in paths:
                libc.mount(None, point.encode(), None, MS_REMOUNT | MS_BIND | MS_RDONLY, None)
    for inner in (p.encode() for p in read_only_again if os.path.isdir(p)):
        if libc.mount(inner, inner, None, MS_BIND | MS_REC, None) == 0:
            libc.mount(None, inner, None, MS_REMOUNT | MS_BIND | MS_RDONLY, None)
    probe = os.path.join(os.path.dirname(writable[0]), ".write-probe")
    try:
        with open(probe, "w"):
            pass
        raise OSError(0, "the file system stayed writable")
    except OSError as error:
        if error.errno == 0:
            raise


def _mount_points() -> list[str]:
    points = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if len(fields) > 4:
                points.append(fields[4].replace("\\040", " "))
    return points


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _drop_capabilities(libc) -> str:
    """No capabilities now or after any exec: without CAP_SYS_ADMIN the read-only view stays, without
    CAP_SYS_PTRACE the parent's /proc/<pid>/{environ,fd,mem} stay closed, without CAP_DAC_OVERRIDE root
    cannot open folders it does not own."""
    _prctl(libc, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    _prctl(libc, PR_SET_SECUREBITS, SECBITS_LOCKED_NOROOT)
    for cap in range(64):
        _prctl(libc, PR_CAPBSET_DROP, cap)
    header, data = _CapHeader(CAPABILITY_VERSION_3, 0), (_CapData * 2)()
    if libc.capset(ctypes.byref(header), data) != 0:
        return f"failed: capset: {os.strerror(ctypes.get_errno())}"
    with open("/proc/self/status") as status:
        if any(line.startswith("CapEff:") and int(line.split()[1], 16) for line in status):
            return "failed: capabilities remain"
    return ("read-only file systems except a private home, no network, no host socket, no capabilities, "
            "no new privileges")


# ---- ending every descendant -----------------------------------------------------------------------------

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
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[-1].split()
        except OSError:
            continue
        if len(fields) > 1:
            found[int(entry)] = int(fields[1])
    return found


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


# ---- the worker's text -----------------------------------------------------------------------------------

_CONTROL = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b.?|[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def clean_text(text: str, limit: int = 2000) -> str:
    """Worker text made safe for a terminal and a one-line protocol: no escape sequences or control
    characters (newlines and tabs kept), at most `limit` characters."""
    text = _CONTROL.sub("", str(text).replace("\r\n", "\n"))
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more characters cut]"


class OutputTrap:
    """Reads one of the worker's output pipes on a thread, keeping at most OUTPUT_CAP bytes until taken."""

    def __init__(self, pipe):
        self.pipe, self.kept, self.dropped = pipe, bytearray(), 0
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        while True:
            try:
                chunk = os.read(self.pipe.fileno(), 65536)
            except (OSError, ValueError):
                return
            if not chunk:
                return
            with self.lock:
                room = OUTPUT_CAP - len(self.kept)
                self.kept += chunk[:max(room, 0)]
                self.dropped += max(len(chunk) - max(room, 0), 0)

    def take(self) -> str:
        with self.lock:
            text, dropped = bytes(self.kept).decode(errors="replace"), self.dropped
            self.kept, self.dropped = bytearray(), 0
        text = clean_text(text, limit=OUTPUT_CAP)
        return text + (f"\n... [{dropped} more bytes of output dropped]" if dropped else "")


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
