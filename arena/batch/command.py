"""`eval.py batch`: the jobs of a batch from files, folders and a manifest, grouped by task and spec, run over every
GPU on Ray (arena/batch/ray_driver.py), and the ranked HTML report. eval.py prints a PlanError (one line and its
exit code) and the consoles' output."""
from __future__ import annotations

import hashlib
import os
import sys

from arena.batch.jobs import BatchPlan, find_submissions, read_manifest, read_rows
from arena.isolation import parent_guard
from arena.report.exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from arena.run.plan import DEFAULT_CASE_SET, PlanError, check_output_paths, read_cases

# `batch --mode test` evaluations at once per GPU (docs/batch.md, "Packing: the emulated corpus")
BATCH_CORRECTNESS_PER_GPU = 4


def run_batch_command(paths, task_dir, mode, specfile, jsonl, address, timeout, report_path=None, gpus=None,
                      manifest=None, emulate_blackwell=False, per_gpu=None, console=None, err_console=None) -> int:
    """Evaluate the submissions `paths` (files or folders) and `manifest` name; the exit code. A problem that
    stops the whole batch before it starts is a PlanError; a file or task that cannot be evaluated is one
    error line, and the others go on."""
    from arena.batch.ray_driver import ray_missing_line, run_batch
    from arena.taskdef.definition import REPO_ROOT

    missing = ray_missing_line()
    if missing:
        raise PlanError(missing, EXIT_USAGE)
    if gpus is not None and address:
        raise PlanError("--gpus sets what a local Ray instance offers; a cluster (--address) declares its own",
                        EXIT_USAGE)
    if not paths and not manifest:
        raise PlanError("name the submissions: PATH... (files or folders), or --manifest FILE", EXIT_USAGE)
    if per_gpu is not None and per_gpu > 1 and mode != "test":
        raise PlanError(f"--per-gpu {per_gpu}: {mode} mode times each submission, and a timed run never shares its "
                        "GPU", EXIT_USAGE)
    per_gpu = per_gpu or (BATCH_CORRECTNESS_PER_GPU if mode == "test" else 1)
    # What to evaluate, as (file, task folder, spec file, expected verdict)
    wanted = [(path, task_dir, specfile, "") for path in paths]
    errors = []
    if manifest:
        entries, problems = read_manifest(manifest)
        errors += problems
        wanted += [(e.file, e.task or task_dir, e.spec or specfile, e.expected) for e in entries]
    jobs = []
    groups: dict[tuple, list] = {}
    for path, task_folder, spec, expected in wanted:
        groups.setdefault((task_folder, spec), []).append((path, expected))
    for (task_folder, spec), members in groups.items():
        try:
            task, cases, spec_text = read_cases(task_folder, spec, DEFAULT_CASE_SET[mode])
        except PlanError as error:  # these files are left out, the others go on
            errors += [str(error)] + [f"{path}: left out (its task or spec file above)" for path, _ in members]
            continue
        folder = os.path.abspath(task.folder)
        inside = os.path.commonpath([folder, str(REPO_ROOT)]) == str(REPO_ROOT)
        plan = BatchPlan(task_dir=os.path.relpath(folder, REPO_ROOT) if inside else folder, task_name=task.name,
                         mode=mode, spec_text=spec_text,
                         cases_id=f"spec:{hashlib.sha256(spec_text.encode()).hexdigest()[:16]}" if spec_text
                         else DEFAULT_CASE_SET[mode], case_count=len(cases), timeout=timeout,
                         emulate_blackwell=emulate_blackwell)
        submissions, missing_files = find_submissions([path for path, _ in members])
        errors += missing_files
        expected_of = dict(members)
        for submission in submissions:
            submission.expected = expected_of.get(submission.path, "")
            jobs.append((submission, plan))
    for line in errors:
        print(f"error: {line}", file=sys.stderr)
    if not jobs:
        raise PlanError("no submission to evaluate", EXIT_USAGE)
    earlier, problems = read_rows(jsonl)
    for line in problems:
        print(f"warning: {line}", file=sys.stderr)
    check_output_paths((report_path, "report", False), (jsonl, "JSONL file", False))
    try:
        code, ranked = run_batch(jobs, jsonl, address, console, err_console, earlier, gpus, per_gpu)
    except (KeyboardInterrupt, parent_guard.Terminated) as stop:
        signum = getattr(stop, "signum", 2)
        print(f"error: interrupted: every evaluation was stopped; the rows already in {jsonl} stay (run the same "
              "command to go on)", file=sys.stderr)
        return 128 + signum
    if report_path:
        from arena.report.html_report import write_batch_report
        plan = jobs[0][1]
        try:
            write_batch_report(report_path, f"nvfp4-arena batch: {plan.task_name} {mode} ({plan.cases_id})",
                               ranked, timed=mode != "test")
            print(f"report: {report_path}", file=sys.stderr)
        except OSError as error:
            print(f"error: cannot write the report: {error}", file=sys.stderr)
    return EXIT_FAILED if errors and code == EXIT_OK else code
