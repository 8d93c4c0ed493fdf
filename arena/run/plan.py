"""The plan of one evaluation, from the command line's values: which task, which cases (a spec file's or the
task's set, `--only`), whether this machine can hold and run them, where the outputs go, and the typed
`RunOptions` the run reads. Every refusal is one `PlanError` line with its exit code (2: usage, 113: a bad spec
or task), before anything runs. eval.py (the command line) calls `plan_run` and `read_cases`; nothing here
imports torch."""
from __future__ import annotations

import os

from arena.report.exit_codes import EXIT_SPEC, EXIT_USAGE
from arena.run.options import RunOptions
from arena.submission_file import SubmissionFile

# The task.yml case set each mode runs when no spec file is given
DEFAULT_CASE_SET = {"test": "tests", "benchmark": "benchmarks", "leaderboard": "benchmarks", "profile": "benchmarks",
                    "diagnose": "tests", "predict": "benchmarks"}



class PlanError(Exception):
    """One line for the user, and eval.py's exit code for it."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


def read_cases(task_dir, specfile, case_set):
    """(task, cases, the spec file's text or None): SPECFILE's cases, checked against the task's rules, else the
    task's `case_set`; a missing or broken one is a PlanError (113)."""
    from arena.taskdef.definition import TaskError, load_task
    from arena.taskdef.specs import SpecError, parse_spec_text
    if task_dir and not os.path.isdir(task_dir):
        raise PlanError(f"no task folder {task_dir} (--task takes a folder holding task.yml)", EXIT_USAGE)
    try:
        task = load_task(task_dir)
        if not specfile:
            return task, task.cases(case_set), None
        try:
            with open(specfile, "rb") as f:
                raw = f.read()
        except OSError as error:
            raise PlanError(f"cannot read spec file {specfile}: {error.strerror}", EXIT_SPEC) from None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            line = raw[:error.start].count(b"\n") + 1
            raise PlanError(f"spec file {specfile} is not UTF-8 text (byte 0x{raw[error.start]:02x} on line "
                            f"{line})", EXIT_SPEC) from None
        cases = parse_spec_text(text)
        if not cases:
            raise PlanError(f"spec file {specfile} holds no cases", EXIT_SPEC)
        task.check_cases(cases, f"spec file {specfile}")
        return task, cases, text
    except (SpecError, TaskError) as error:
        raise PlanError(str(error), EXIT_SPEC) from None


def check_memory(task, indexed):
    """Each case's memory (task.yml `memory_bytes`) against what this machine has available, before anything
    is generated: a case that cannot fit is refused (113), not the out-of-memory killer minutes later."""
    from arena.taskdef.memory import EstimateError, available_bytes, estimate_bytes, gib
    expression, available = task.config.memory_bytes, available_bytes()
    if not expression or available is None:
        return
    for index, case in indexed:
        try:
            need = estimate_bytes(expression, case.args)
        except EstimateError as error:
            raise PlanError(f"{task.folder / 'task.yml'}: {error}", EXIT_SPEC) from None
        if need > available:
            raise PlanError(f"case {index} ({case.spec}) needs about {gib(need)} of memory; this machine has "
                            f"{gib(available)} available", EXIT_SPEC)


def check_device(task, case_set: str, specfile):
    """A case set task.yml marks `gpu_only_sets` (cases whose inputs alone take minutes to make on a CPU)
    is refused up front without a GPU: one line naming what runs instead."""
    from arena.report.progress import gpu_present
    if specfile or case_set not in task.config.gpu_only_sets or gpu_present():
        return
    raise PlanError(f"{task.name}'s {case_set} need a CUDA GPU (their inputs alone take minutes to make on a CPU): "
                    f"on a CPU, use --set tests (or a spec file of smaller cases)", EXIT_SPEC)


def check_output_paths(*outputs):
    """Each (path, what, is_folder) to be written later must be writable now, before anything runs."""
    from arena.report.outputs import path_problem
    for path, what, folder in outputs:
        problem = path_problem(path, what, folder) if path else None
        if problem:
            raise PlanError(problem, EXIT_USAGE)


def select_cases(cases: list, only: str | None) -> list:
    """(index, case) pairs: every case, or those `--only` names."""
    indexed = list(enumerate(cases))
    if not only:
        return indexed
    try:
        wanted = {int(x) for x in only.split(",") if x.strip()}
    except ValueError:
        raise PlanError(f"--only takes case numbers like 0,2; got {only!r}", EXIT_USAGE) from None
    indexed = [(i, c) for i, c in indexed if i in wanted]
    if not indexed:
        raise PlanError(f"--only {only} selects none of the {len(cases)} cases", EXIT_USAGE)
    return indexed


def plan_run(mode: str, given: dict, case_set: str, secret: int | None, popcorn_fd: str | None):
    """(task, RunOptions) for `mode` as the command line `given` asks (click's values); `case_set` is the set
    to run without a spec file, `secret` the secret seed (None: none)."""
    from arena.taskdef.specs import apply_secret_seed
    specfile = given["specfile"]
    task, cases, _ = read_cases(given["task_dir"], specfile, case_set)
    for case in cases:
        case.extra.setdefault("sol_us", task.speed_of_light_us(case.args))
    indexed = select_cases(cases, given["only"])
    check_memory(task, indexed)
    check_device(task, case_set, specfile)
    apply_secret_seed([c for _, c in indexed], secret)
    submission = given["submission"]
    if not os.path.isfile(submission):
        raise PlanError(f"no submission file at {submission} (use --submission PATH)", EXIT_USAGE)
    try:
        source = SubmissionFile.read(submission)
    except OSError as error:
        raise PlanError(f"cannot read the submission {submission}: {error.strerror}", EXIT_USAGE) from None
    report_path, plots_dir = given.get("report_path"), given.get("plots_dir")
    check_output_paths((given["json_path"], "JSON file", False), (report_path, "report", False),
                       (plots_dir, "plots folder", True))
    if mode == "diagnose" and popcorn_fd is not None:
        raise PlanError("diagnose mode writes a report for people; it has no POPCORN_FD protocol", EXIT_USAGE)
    options = RunOptions(mode=mode, submission=source, cases=tuple(indexed),
                         timeout=given["timeout"], max_runs=given.get("max_runs"), max_time=given.get("max_time"),
                         keep_going=given.get("keep_going", False), timing_method=given.get("timing_method"),
                         diagnose_all=given.get("diagnose_all", False), strict=given.get("strict", False),
                         sandboxed=not given["no_sandbox"], popcorn_fd=popcorn_fd,
                         figures=bool(report_path or plots_dir), quiet=given.get("quiet", False),
                         emulate_blackwell=given.get("emulate_blackwell", False) or mode == "predict")
    return task, options
