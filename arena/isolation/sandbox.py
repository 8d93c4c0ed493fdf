"""Process isolation for the untrusted worker (docs/integrity.md, "The sandbox").

The parent (eval.py, arena/worker/client.py) uses it to:
- keep secrets out of reach: `reexec_without_secrets` re-executes eval.py with POPCORN_SEED and `--seed`
  handed over through a pipe, so neither is in /proc/<pid>/environ or /proc/<pid>/cmdline;
- start the worker in a bubblewrap jail (arena/isolation/bubblewrap.py) with one private home per submission, owned by
  the jail's own uid (its JIT builds survive between runs, shared with no other submission), or say in one
  line why no jail is possible here;
- end every descendant by walking this process's descendants (it is a subreaper, so orphans and session
  leaders come back to it) in SIGKILL rounds until none remain;
- turn SIGTERM and SIGHUP into a clean stop (the same path as Ctrl-C);
- strip control characters from every text the worker produced, and cap how much of it is kept.

Module level imports only the standard library: eval.py calls it before torch is imported.
"""
from __future__ import annotations

import ctypes
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time

from arena.isolation import bubblewrap, gpu_nodes

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
    # A signal mask is inherited: a parent that blocked these (a test runner's thread, a library) would leave
    # Ctrl-C and SIGTERM pending for ever, and the run would never stop with the cases it finished
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP})


# ---- the worker's jail and its private folder --------------------------------------------------------------

HOME_ENV = "ARENA_WORKER_HOME"
WRITABLE_ENV = "ARENA_WORKER_WRITABLE"    # folders (os.pathsep-separated) the worker may write besides its home
_jail_checks: dict = {}                    # (bwrap, jailed as another uid) -> '' or why a jail cannot start here


def _jail_for(key: str) -> tuple[int | None, str | None, str]:
    """(the jail's uid for `key`, the bwrap binary, '' or why no jail can start here), the check run once per
    process for each kind of jail (another uid as root, the caller's uid otherwise)."""
    uid = bubblewrap.jail_uid(key) if os.geteuid() == 0 else None
    bwrap = bubblewrap.find_bwrap()
    if (bwrap, uid is None) not in _jail_checks:
        _jail_checks[(bwrap, uid is None)] = bubblewrap.check(bwrap, uid)
    return uid, bwrap, _jail_checks[(bwrap, uid is None)]


class Isolation:
    """How the worker is started. `state` is one line for reports; `weak` says why the worker could harm a
    later run or the evaluator (leaderboard refuses to rank then, unless --no-sandbox)."""

    def __init__(self, submission: str, enabled: bool):
        self.home = None
        self.uid = None
        self.weak = ""
        self.limits = bubblewrap.default_limits()
        if not enabled:
            self.state, self.weak = "off (--no-sandbox)", "the sandbox is off (--no-sandbox)"
            return
        if not sys.platform.startswith("linux"):
            self.state, self.weak = "off (not Linux)", "the sandbox (bubblewrap) needs Linux"
            return
        digest = hashlib.sha256(open(submission, "rb").read()).hexdigest()[:24]
        uid, bwrap, problem = _jail_for(digest)
        if problem:
            self.state, self.weak = f"off: {problem}", f"no sandbox: {problem}"
            return
        self.uid, self.bwrap = uid, bwrap
        self.home = _private_home(digest, uid)
        self.home_claim = _claim_home(digest)
        self.tidy_home()        # what a run killed midway left (a build's lock file) would stall this one
        who = "a uid of its own" if uid is not None else "the evaluator's uid in a user namespace (not root)"
        self.state = (f"bubblewrap jail: {who}; own PID, IPC, network and UTS namespaces; minimal /dev; private "
                      f"/tmp and /dev/shm; read-only files except its home; python -I; no capabilities; limits: "
                      f"data {self.limits.memory_bytes >> 30} GiB, {self.limits.processes} processes, "
                      f"{self.limits.open_files} open files")

    def tidy_home(self) -> None:
        """`tidy_home` on this run's home, when no other run of the same file holds it (a batch may evaluate one
        file twice at once): call it only when this run's worker is gone."""
        if self.home is None:
            return
        try:
            fcntl.flock(self.home_claim, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            pass                # another run's worker may be building in it: leave it as it is
        else:
            tidy_home(self.home)
        fcntl.flock(self.home_claim, fcntl.LOCK_SH)     # a failed or granted conversion: back to shared

    def wrap(self, argv: list[str], readable: list[str]) -> list[str]:
        """`argv` as the jail runs it (unchanged without a jail)."""
        if self.home is None:
            return argv
        writable = [os.path.realpath(p) for p in os.environ.get(WRITABLE_ENV, "").split(os.pathsep) if p]
        return bubblewrap.command(argv, self.home, self.uid, self.limits, readable=readable,
                                  writable=[p for p in writable if os.path.isdir(p)], bwrap=self.bwrap)

    def environment(self) -> dict:
        """The parent's environment without secrets or the runner's variables; caches in the private home."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("POPCORN_", "ARENA_", "PYTHON"))}
        if self.home:
            cache = os.path.join(self.home, "cache")
            env.update(HOME=self.home, TMPDIR=os.path.join(self.home, "tmp"), XDG_CACHE_HOME=cache,
                       TORCH_EXTENSIONS_DIR=os.path.join(cache, "torch_extensions"),
                       TRITON_CACHE_DIR=os.path.join(cache, "triton"), CUDA_CACHE_PATH=os.path.join(cache, "nv"))
            env[HOME_ENV] = self.home
            gpu = gpu_nodes.evaluation_gpu()
            if gpu is not None:     # the jail sees this one GPU (arena/isolation/gpu_nodes.py): named, not counted
                env["CUDA_VISIBLE_DEVICES"] = gpu.uuid
        return env


def run_jailed(commands: list[list[str]], key: str, files: dict[str, str], readable: list[str] = (),
               env: dict | None = None) -> tuple[list[subprocess.CompletedProcess], str]:
    """Run commands the submission controls (an nvcc build with its flags, cuobjdump on what it built) one after
    another in a jail whose only writable folder is a fresh one holding `files`; it is their working folder
    (name files relative to it) and is removed afterwards. Returns the finished processes (text output; the
    first failure ends the list) and '' or why they ran unjailed. The evaluator reads nothing the commands
    wrote except their stdout and stderr."""
    uid, bwrap, problem = _jail_for(key)
    problem = problem if sys.platform.startswith("linux") else "the sandbox needs Linux"
    folder = tempfile.mkdtemp(prefix="arena-jail-")
    done = []
    try:
        for name, text in files.items():
            with open(os.path.join(folder, os.path.basename(name)), "x") as f:
                f.write(text)
        if not problem and uid is not None:
            for name in [*os.listdir(folder), "."]:
                os.chown(os.path.join(folder, name), uid, uid, follow_symlinks=False)
        for argv in commands:
            if not problem:
                argv = bubblewrap.command(argv, folder, uid, bubblewrap.default_limits(), readable=list(readable),
                                          bwrap=bwrap)
            done.append(subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True,
                                       errors="replace", stdin=subprocess.DEVNULL))
            if done[-1].returncode != 0:
                break
    finally:
        shutil.rmtree(folder, ignore_errors=True)          # never follows a link the commands left
    return done, problem


HOME_CACHE_LIMIT = 2 << 30      # bytes of build cache a home keeps between runs


BUILD_LOCK = "lock"     # torch's FileBaton (load_inline, load): a build holds the folder while this file exists


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
            if name == "cache" and folder and _disk_bytes(os.path.join(home, name)) <= HOME_CACHE_LIMIT:
                _remove_build_locks(os.path.join(home, name))
                continue
            if folder:
                shutil.rmtree(os.path.join(home, name), ignore_errors=True)     # fd-based: links not followed
            else:
                os.unlink(name, dir_fd=fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _remove_build_locks(folder: str) -> None:
    for _, _, names, dir_fd in os.fwalk(folder, follow_symlinks=False):
        if BUILD_LOCK in names:
            try:
                if stat.S_ISREG(os.stat(BUILD_LOCK, dir_fd=dir_fd, follow_symlinks=False).st_mode):
                    os.unlink(BUILD_LOCK, dir_fd=dir_fd)
            except OSError:
                pass


def _disk_bytes(folder: str) -> int:
    """Blocks in use under a folder (a sparse file counts what it holds), never following a link."""
    total = 0
    for _, _, names, dir_fd in os.fwalk(folder, follow_symlinks=False):
        for name in names:
            try:
                total += os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_blocks * 512
            except OSError:
                pass
    return total


def _private_home(digest: str, uid: int | None) -> str:
    """<tmp>/nvfp4-arena-homes/<digest>: the one folder the jailed worker may write, owned by its uid, kept
    between runs of the same file (its JIT builds survive) and shared with no other submission. The parent
    makes and owns the base folder and never looks inside a home: whatever the worker left there (links
    included) is never followed by the evaluator."""
    base = os.path.join(tempfile.gettempdir(), "nvfp4-arena-homes")
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


def _claim_home(digest: str) -> int:
    """A shared flock on <tmp>/nvfp4-arena-homes/<digest>.lock, held for the run (closed with the process): a
    run tidies its home only when it can turn this exclusive, so never under another run's worker."""
    base = os.path.join(tempfile.gettempdir(), "nvfp4-arena-homes")
    base_fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        fd = os.open(f"{digest}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                     dir_fd=base_fd)
    finally:
        os.close(base_fd)
    fcntl.flock(fd, fcntl.LOCK_SH)
    return fd


def start_worker() -> str:
    """First thing in the worker, before torch or the submission. Its cores are locked (arena/isolation/affinity_lock.py).
    Jailed, bubblewrap ends it with the parent and the parent's home folders are made here (the parent never
    enters the home); without a jail it arms its own death signal. Returns '' or why the cores are not locked."""
    from arena.isolation.affinity_lock import lock_affinity
    unlocked = lock_affinity() if sys.platform.startswith("linux") else ""
    home = os.environ.pop(HOME_ENV, None)
    if home:
        for var in ("TMPDIR", "XDG_CACHE_HOME"):
            folder = os.environ.get(var, "")
            if folder.startswith(home):
                if os.path.islink(folder) or (os.path.lexists(folder) and not os.path.isdir(folder)):
                    os.unlink(folder)           # left by an earlier run of this file: its own home, its own loss
                os.makedirs(folder, mode=0o700, exist_ok=True)
        return unlocked
    libc = _libc() if sys.platform.startswith("linux") else None
    if libc is not None:
        _prctl(libc, PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() == 1:                  # the parent died before the death signal was armed
            os._exit(1)
    return unlocked


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
