"""Cores an evaluation cannot widen: a cpuset cgroup holding only its claimed cores, which the evaluation's
process enters before it starts (arena/batch/jobs.py). Affinity alone is no fence: a submission calls
sched_setaffinity itself and takes every core; inside a cpuset it cannot name a core outside the set.

Made by root where the cgroup file system is writable: cgroup v1's cpuset hierarchy, or v2 where the cpuset
controller can be enabled below this process's own cgroup. Elsewhere `Cpuset.make` says why in one line and the
evaluation falls back to affinity (which the batch row says). Standard library only.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

ROOT = "/sys/fs/cgroup"


def _own_path(controller: str) -> str | None:
    """This process's cgroup in the hierarchy of `controller` ("" for the v2 unified one), from /proc."""
    try:
        for line in open("/proc/self/cgroup"):
            _, controllers, path = line.rstrip("\n").split(":", 2)
            if controllers.split(",") == [controller] or controller in controllers.split(",") or \
                    (controller == "" and controllers == ""):
                return path
    except OSError:
        pass
    return None


def _write(path: str, text: str):
    with open(path, "w") as f:
        f.write(text)


@dataclass
class Cpuset:
    folder: str                     # the cgroup's folder; a process enters by writing its pid to `procs`
    procs: str

    @classmethod
    def make(cls, cores: set[int], name: str) -> tuple[Cpuset | None, str]:
        """(the cgroup, "") or (None, why not)."""
        if os.geteuid() != 0:
            return None, "not root: the cores are pinned by affinity only"
        listed = ",".join(str(c) for c in sorted(cores))
        v1 = os.path.join(ROOT, "cpuset")
        try:
            if os.path.isfile(os.path.join(v1, "cpuset.cpus")):
                parent = os.path.join(v1, (_own_path("cpuset") or "/").lstrip("/"))
                folder = os.path.join(parent, name)
                os.makedirs(folder, exist_ok=True)
                _write(os.path.join(folder, "cpuset.mems"), open(os.path.join(parent, "cpuset.mems")).read())
                _write(os.path.join(folder, "cpuset.cpus"), listed)
                return cls(folder, os.path.join(folder, "cgroup.procs")), ""
            if os.path.isfile(os.path.join(ROOT, "cgroup.controllers")):
                parent = os.path.join(ROOT, (_own_path("") or "/").lstrip("/"))
                if "cpuset" not in open(os.path.join(parent, "cgroup.controllers")).read().split():
                    return None, "the cgroup has no cpuset controller: the cores are pinned by affinity only"
                folder = os.path.join(parent, name)
                os.makedirs(folder, exist_ok=True)
                _write(os.path.join(parent, "cgroup.subtree_control"), "+cpuset")
                _write(os.path.join(folder, "cpuset.cpus"), listed)
                return cls(folder, os.path.join(folder, "cgroup.procs")), ""
        except OSError as error:
            return None, f"no cpuset cgroup ({error.strerror}): the cores are pinned by affinity only"
        return None, "no cgroup file system: the cores are pinned by affinity only"

    def enter(self):
        """Move the calling process (a child before exec) into the set."""
        _write(self.procs, str(os.getpid()))

    def remove(self):
        """Once every process of the set has ended."""
        try:
            os.rmdir(self.folder)
        except OSError:
            pass
