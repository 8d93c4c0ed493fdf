"""A task folder (task.yml, task.py, reference.py): its cases, tolerances, speed of light and reference."""
from __future__ import annotations

import importlib
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from arena.submission_file import SubmissionFile
from arena.taskdef.specs import Case, check_case, format_spec
from arena.taskdef.tolerance import ToleranceError, parse_tolerance

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
CASE_SETS = ("tests", "benchmarks", "robustness")


class TaskError(ValueError):
    """A task folder that cannot be used; the message names the file and the problem."""


_LEADERBOARD = re.compile(r"^#!POPCORN\s+leaderboard\s+(\S+)", re.MULTILINE)


# Words that say which task a submission was written for, when it has no #!POPCORN header: its file name and
# source. nvfp4_gemm has none: `gemm` is in every GEMM task's words, so it is never the guess, and no count of it
# proves that a file is not a gemm one.
_TASK_WORDS = {
    "nvfp4_gemv": re.compile(r"gemv", re.I),
    "nvfp4_dual_gemm": re.compile(r"dual[_ -]?gemm", re.I),
    "nvfp4_group_gemm": re.compile(r"group(ed)?[_ -]?gemm", re.I),
    "nvfp4_moe": re.compile(r"(?<![a-z])moe(?![a-z])|mixture[_ -]of[_ -]experts", re.I),
    "fp8_attention": re.compile(r"attention", re.I),
}


def _where(named: str) -> str:
    folder = REPO_ROOT / "tasks" / named
    return f"pass --task {folder.relative_to(REPO_ROOT)}" if (folder / "task.yml").exists() else \
        "no task folder of that name here" if named != "nvfp4_gemm" else "leave --task out"


def task_named_elsewhere(submission: SubmissionFile, task: "Task") -> str:
    """One line when the submission's `#!POPCORN leaderboard NAME` header (popcorn-cli's) names another task
    than the one this run evaluates, or, without a header, when its name and source speak of another task (at
    least twice) and never of this one: its inputs will not be the ones it was written for."""
    text, name = submission.text[:1 << 20], submission.name
    found = _LEADERBOARD.search(text[:4096])
    if found:
        named = found.group(1).removeprefix("modal_")        # the runner's prefix: modal_nvfp4_dual_gemm
        if named == task.name:
            return ""
        return (f"{name} names the leaderboard {found.group(1)} (its #!POPCORN line), but this run evaluates "
                f"{task.name}: {_where(named)}")
    if task.name not in _TASK_WORDS and task.name != "nvfp4_gemm":
        return ""
    words = name + "\n" + text
    counts = {other: len(pattern.findall(words)) for other, pattern in _TASK_WORDS.items()}
    other, count = max(((o, c) for o, c in counts.items() if o != task.name), key=lambda oc: oc[1])
    if count < 2 or counts.get(task.name):
        return ""
    return (f"{name} speaks of {other} ({count} mentions) and not of {task.name}, which this run evaluates: if it "
            f"was written for {other}, {_where(other)}")


@dataclass(frozen=True)
class TaskConfig:
    """task.yml as typed fields, each checked when the task loads (a TaskError line naming the field). `raw`
    keeps the whole mapping, runner keys included (lang, config, files, description)."""
    case_sets: dict             # "tests" / "benchmarks" / "robustness" -> list of case mappings
    speed_of_light_us: tuple    # one per benchmark, in order (µs)
    case_rules: dict | None     # arena/taskdef/specs.py check_case
    expect_mma: bool            # `eval.py compile` requires tensor-core MMA instructions
    calls_per_sample: int       # competition_timing.calls_per_sample: inputs timed back to back per sample
    tolerance: dict             # {"rtol", "atol"}
    memory_bytes: str | None    # an expression of a case's arguments (arena/taskdef/memory.py)
    gpu_only_sets: tuple        # case sets refused without a GPU
    raw: dict

    @classmethod
    def parse(cls, config: dict, path: Path) -> "TaskConfig":
        def field(name, kinds, default, what):
            value = config.get(name, default)
            right = isinstance(value, bool) if kinds is bool else isinstance(value, kinds) and not isinstance(value, bool)
            if value is None or right:
                return value
            raise TaskError(f"{path}: `{name}` must be {what}, got {value!r}")
        sets = {which: field(which, list, [], "a list of case mappings") or [] for which in CASE_SETS}
        sol = field("speed_of_light_us", list, [], "a list of numbers (µs, one per benchmark)") or []
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in sol):
            raise TaskError(f"{path}: `speed_of_light_us` must be a list of numbers > 0, got {sol!r}")
        timing = field("competition_timing", dict, {}, "a mapping ({calls_per_sample: N})") or {}
        calls = timing.get("calls_per_sample", 1)
        if not isinstance(calls, int) or isinstance(calls, bool) or not 1 <= calls <= 1000:
            raise TaskError(f"{path}: competition_timing.calls_per_sample must be an integer from 1 to 1000, got "
                            f"{calls!r}")
        gpu_only = field("gpu_only_sets", list, [], f"a list of case sets ({', '.join(CASE_SETS)})") or []
        if not set(gpu_only) <= set(CASE_SETS):
            raise TaskError(f"{path}: `gpu_only_sets` names a set other than {', '.join(CASE_SETS)}: {gpu_only!r}")
        try:
            tolerance = parse_tolerance(config.get("tolerance"), path)
        except ToleranceError as error:
            raise TaskError(str(error)) from None
        return cls(case_sets=sets, speed_of_light_us=tuple(float(v) for v in sol),
                   case_rules=field("case_rules", dict, None, "a mapping of argument rules"),
                   expect_mma=bool(field("expect_mma", bool, False, "true or false")), calls_per_sample=calls,
                   tolerance=tolerance, memory_bytes=field("memory_bytes", str, None, "an expression (a string)"),
                   gpu_only_sets=tuple(gpu_only), raw=config)


@dataclass
class Task:
    folder: Path
    config: TaskConfig

    @property
    def name(self) -> str:
        return self.folder.name if self.folder != REPO_ROOT else "nvfp4_gemm"

    def cases(self, which: str) -> list[Case]:
        entries = self.config.case_sets.get(which, [])
        sol = self.config.speed_of_light_us if which == "benchmarks" else ()
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
        rules = self.config.case_rules
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
        return self.config.expect_mma

    @property
    def competition_calls(self) -> int:
        """Distinct inputs the competition's eval.py times back to back per sample (task.yml
        `competition_timing.calls_per_sample`; 1 where it times every call alone)."""
        return self.config.calls_per_sample

    @property
    def tolerance(self) -> dict:
        """{"rtol": ..., "atol": ...}: task.yml `tolerance`, the one value the task's check and the diagnosis
        use (reference.py reads it with `tolerance_beside`)."""
        return self.config.tolerance

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
    task = Task(folder=folder, config=TaskConfig.parse(config, path))
    for which in CASE_SETS:
        task.cases(which)   # validate early: one clear line instead of a failure mid-run
    return task
