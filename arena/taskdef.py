"""A task folder (task.yml, task.py, reference.py): its cases, tolerances, speed of light and reference."""
from __future__ import annotations

import importlib
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from arena.specs import Case, check_case, format_spec
from arena.tolerance import ToleranceError, parse_tolerance

REPO_ROOT = Path(__file__).resolve().parent.parent
CASE_SETS = ("tests", "benchmarks", "robustness")


class TaskError(ValueError):
    """A task folder that cannot be used; the message names the file and the problem."""


_LEADERBOARD = re.compile(r"^#!POPCORN\s+leaderboard\s+(\S+)", re.MULTILINE)


def task_named_elsewhere(submission: str, task: "Task") -> str:
    """One line when the submission's `#!POPCORN leaderboard NAME` header (popcorn-cli's) names another task
    than the one this run evaluates: its inputs will not be the ones it was written for."""
    try:
        with open(submission, encoding="utf-8", errors="replace") as f:
            head = f.read(4096)
    except OSError:
        return ""
    found = _LEADERBOARD.search(head)
    if not found or found.group(1) == task.name:
        return ""
    named = found.group(1)
    folder = REPO_ROOT / "tasks" / named
    where = f"pass --task {folder.relative_to(REPO_ROOT)}" if (folder / "task.yml").exists() else \
        "no task folder of that name here" if named != "nvfp4_gemm" else "leave --task out"
    return (f"{os.path.basename(submission)} names the leaderboard {named} (its #!POPCORN line), but this run "
            f"evaluates {task.name}: {where}")


@dataclass
class Task:
    folder: Path
    config: dict

    @property
    def name(self) -> str:
        return self.folder.name if self.folder != REPO_ROOT else "nvfp4_gemm"

    def cases(self, which: str) -> list[Case]:
        entries = self.config.get(which) or []
        sol = (self.config.get("speed_of_light_us") or []) if which == "benchmarks" else []
        cases = []
        for i, args in enumerate(entries):
            if not isinstance(args, dict):
                raise TaskError(f"{self.folder / 'task.yml'}: entry {i} of `{which}` is not a mapping: {args!r}")
            # YAML lists become tuples, as the grouped spec grammar parses `[80, 176]`.
            case = Case(args={k: tuple(v) if isinstance(v, list) else v for k, v in args.items()},
                        spec=format_spec(args))
            if i < len(sol):
                case.extra["sol_us"] = float(sol[i])
            cases.append(case)
        self.check_cases(cases, f"{self.folder / 'task.yml'} `{which}`")
        return cases

    def check_cases(self, cases: list[Case], where: str):
        """Every case against task.yml's `case_rules`; TaskError naming the first broken case and why."""
        rules = self.config.get("case_rules")
        if not rules:
            return
        for i, case in enumerate(cases):
            problem = check_case(case.args, rules)
            if problem:
                raise TaskError(f"{where}, case {i} ({case.spec}): {problem}")

    def speed_of_light_us(self, args: dict) -> float | None:
        """The SOL of the benchmark with the same arguments apart from the seed, if the task lists one."""
        key = {k: v for k, v in args.items() if k != "seed"}
        for case in self.cases("benchmarks"):
            if {k: v for k, v in case.args.items() if k != "seed"} == key:
                return case.extra.get("sol_us")
        return None

    @property
    def expect_mma(self) -> bool:
        """Whether `eval.py compile` requires tensor-core MMA instructions (task.yml `expect_mma`)."""
        return bool(self.config.get("expect_mma", False))

    @property
    def competition_calls(self) -> int:
        """Distinct inputs the competition's eval.py times back to back per sample (task.yml
        `competition_timing.calls_per_sample`; 1 where it times every call alone)."""
        timing = self.config.get("competition_timing") or {}
        calls = timing.get("calls_per_sample", 1) if isinstance(timing, dict) else 1
        if not isinstance(calls, int) or isinstance(calls, bool) or not 1 <= calls <= 1000:
            raise TaskError(f"{self.folder / 'task.yml'}: competition_timing.calls_per_sample must be an integer "
                            f"from 1 to 1000, got {calls!r}")
        return calls

    @property
    def tolerance(self) -> dict:
        """{"rtol": ..., "atol": ...}: task.yml `tolerance`, the one value the task's check and the diagnosis
        use (reference.py reads it with `tolerance_beside`)."""
        try:
            return parse_tolerance(self.config.get("tolerance"), self.folder / "task.yml")
        except ToleranceError as error:
            raise TaskError(str(error)) from None

    def import_reference(self):
        """Import this task's reference module (the task folder first on sys.path, the repo root after)."""
        add_task_paths(self.folder)
        for name in ("reference", "task"):
            sys.modules.pop(name, None)
        try:
            return importlib.import_module("reference")
        except Exception as error:
            raise TaskError(f"the task's reference.py ({self.folder}) failed to import: "
                            f"{type(error).__name__}: {error}") from None


def add_task_paths(folder: Path):
    for path in (str(REPO_ROOT), str(folder)):      # task folder ends up first
        if path in sys.path:
            sys.path.remove(path)
        sys.path.insert(0, path)


def load_task(folder: str | Path | None) -> Task:
    folder = Path(folder).resolve() if folder else REPO_ROOT
    path = folder / "task.yml"
    if not path.is_file():
        raise TaskError(f"no task.yml in {folder}")
    try:
        config = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise TaskError(f"{path}: not valid YAML: {str(error).splitlines()[0]}") from None
    if not isinstance(config, dict):
        raise TaskError(f"{path}: expected a mapping at the top level")
    for needed in ("reference.py", "task.py"):
        if not (folder / needed).is_file():
            raise TaskError(f"{folder}: missing {needed}")
    task = Task(folder=folder, config=config)
    for which in CASE_SETS:
        task.cases(which)   # validate early: one clear line instead of a failure mid-run
    task.competition_calls  # validated here too: a bad value is one TaskError line before anything runs
    return task
