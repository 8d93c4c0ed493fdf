"""How the untrusted worker is started (docs/integrity.md, "The sandbox"): in a bubblewrap jail
(arena/isolation/bubblewrap.py) under a uid of its own, with one private home per submission
(arena/isolation/homes.py) and only its evaluation's GPU (arena/isolation/gpu_nodes.py), or unjailed with one
line that says why no jail is possible here. `Isolation` is the parent's side (arena/worker/spawn.py,
arena/worker/client.py); `start_worker` is the first thing the worker runs; `run_jailed` runs the commands a
submission controls besides the worker (nvcc and its flags: arena/compile/build.py).
Standard library only.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile

from arena.isolation import bubblewrap, gpu_nodes, homes, processes
from arena.submission_file import SubmissionFile

NO_SANDBOX_ENV = "ARENA_NO_SANDBOX"        # set to 1 by --no-sandbox (or under ncu): the worker runs as we do
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

    def __init__(self, submission: SubmissionFile, enabled: bool):
        self.home = None
        self.uid = None
        self.weak = ""
        self.digest = submission.sha256[:24]
        self.limits = bubblewrap.default_limits()
        if not enabled:
            self.state, self.weak = "off (--no-sandbox)", "the sandbox is off (--no-sandbox)"
            return
        if not sys.platform.startswith("linux"):
            self.state, self.weak = "off (not Linux)", "the sandbox (bubblewrap) needs Linux"
            return
        digest = self.digest
        uid, bwrap, problem = _jail_for(digest)
        if problem:
            self.state, self.weak = f"off: {problem}", f"no sandbox: {problem}"
            return
        self.uid, self.bwrap = uid, bwrap
        self.home = homes.private_home(digest, uid)
        self.home_claim = homes.claim_home(digest)
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
            homes.tidy_home(self.home)
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
        else:
            # Unjailed evaluations share one home: a folder of builds per file, or two files that name their
            # extension alike (versions of one kernel, run at once by a batch) would load each other's library.
            base = env.get("TORCH_EXTENSIONS_DIR") or os.path.join(
                env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "torch_extensions")
            env["TORCH_EXTENSIONS_DIR"] = os.path.join(base, self.digest)
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
    if processes.die_with_parent() and os.getppid() == 1:    # the parent died before the signal was armed
        os._exit(1)
    return unlocked
