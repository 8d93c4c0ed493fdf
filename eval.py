"""nvfp4-arena evaluator: `python eval.py {test,benchmark,leaderboard,profile} [SPECFILE]`.

With POPCORN_FD set (the competition's runner), it speaks the official protocol: `key: value` lines on that
file descriptor, times in ns, exit codes 0 / 112 (failed) / 113 (bad spec) / 2 (usage). Otherwise it reads
cases from task.yml (or SPECFILE) and prints a readable report.
"""
import os
import sys

import click

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

EXIT_OK, EXIT_USAGE, EXIT_FAILED, EXIT_SPEC = 0, 2, 112, 113
MODES = ("test", "benchmark", "leaderboard", "profile", "compile", "diagnose")
DEFAULT_SET = {"test": "tests", "benchmark": "benchmarks", "leaderboard": "benchmarks", "profile": "benchmarks",
               "diagnose": "tests"}


def fail_setup(message: str, code: int):
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("mode", type=click.Choice(MODES))
@click.argument("specfile", required=False, type=click.Path(dir_okay=False))
@click.option("--submission", default="submission.py", show_default=True, help="The submission file to evaluate.")
@click.option("--task", "task_dir", default=None, help="Task folder with task.yml (default: the folder of eval.py).")
@click.option("--set", "case_set", type=click.Choice(("tests", "benchmarks", "robustness")), default=None,
              help="Which cases of task.yml to run (default: tests for test, benchmarks otherwise).")
@click.option("--only", default=None, help="Comma-separated case numbers to run, e.g. 0,3.")
@click.option("--seed", type=int, default=None, help="A secret seed to combine with each case's seed, "
              "as in the competition's private runs.")
@click.option("--json", "json_path", default=None, help="Also write the results to this JSON file.")
@click.option("--timeout", type=float, default=180.0, show_default=True, help="Seconds per case before the "
              "submission is killed (its first case includes any JIT compile).")
@click.option("--max-runs", type=int, default=None, help="Most timed calls per benchmark case.")
@click.option("--max-time", type=float, default=None, help="Most seconds of timing per benchmark case.")
@click.option("--arch", "archs", multiple=True, type=click.Choice(("sm_90a", "sm_100a")),
              help="compile mode: the target(s) to build for (default both).")
def main(mode, specfile, submission, task_dir, case_set, only, seed, json_path, timeout, max_runs, max_time, archs):
    """Evaluate an NVFP4 submission: MODE is test, benchmark, leaderboard, profile, compile or diagnose."""
    if mode == "compile":
        sys.exit(compile_mode(submission, archs or ("sm_90a", "sm_100a")))
    from arena.specs import SpecError, apply_secret_seed, parse_spec_text
    from arena.taskdef import TaskError, load_task

    popcorn_fd = os.environ.pop("POPCORN_FD", None)      # the worker inherits neither the fd nor its number
    secret = _take_secret_seed(seed)
    try:
        task = load_task(task_dir)
        if specfile:
            try:
                text = open(specfile).read()
            except OSError as error:
                fail_setup(f"cannot read spec file {specfile}: {error.strerror}", EXIT_SPEC)
            cases = parse_spec_text(text)
            if not cases:
                fail_setup(f"spec file {specfile} holds no cases", EXIT_SPEC)
        else:
            cases = task.cases(case_set or DEFAULT_SET[mode])
    except (SpecError, TaskError) as error:
        fail_setup(str(error), EXIT_SPEC)
    for case in cases:
        case.extra.setdefault("sol_us", task.speed_of_light_us(case.args))
    indexed = list(enumerate(cases))
    if only:
        try:
            wanted = {int(x) for x in only.split(",") if x.strip()}
        except ValueError:
            fail_setup(f"--only takes case numbers like 0,2; got {only!r}", EXIT_USAGE)
        indexed = [(i, c) for i, c in indexed if i in wanted]
        if not indexed:
            fail_setup(f"--only {only} selects none of the {len(cases)} cases", EXIT_USAGE)
    apply_secret_seed([c for _, c in indexed], secret)
    if not os.path.isfile(submission):
        fail_setup(f"no submission file at {submission} (use --submission PATH)", EXIT_USAGE)

    if mode == "diagnose":      # probes for people: no POPCORN protocol; one small default case unless chosen
        if popcorn_fd is not None:
            fail_setup("diagnose mode writes a report for people; it has no POPCORN_FD protocol", EXIT_USAGE)
        if not specfile and not only and task.name == "nvfp4_gemm":
            from arena.diagnose import DEFAULT_PROBE_CASE
            from arena.specs import Case, format_spec
            indexed = [(0, Case(args=dict(DEFAULT_PROBE_CASE), spec=format_spec(DEFAULT_PROBE_CASE)))]
        elif not specfile and not only:
            indexed = indexed[:1]         # other tasks: their first test case
    from arena import report, static_checks
    static = static_checks.scan(submission)
    results, reports, info = run_mode(mode, task, indexed, submission, timeout, max_runs, max_time, popcorn_fd)
    info["static_warnings"] = [f.as_dict() for f in static]
    if popcorn_fd is not None:
        report.write_popcorn(int(popcorn_fd), report.popcorn_lines(mode, results, reports))
        report.echo_integrity(results, static, info.get("integrity"))   # stderr: protocol lines stay official
    else:
        report.render(_console(), mode, results, info, reports)
    if json_path:
        report.write_json(json_path, mode, task.name, submission, results, info, reports)
    sys.exit(EXIT_OK if all(r.passed for r in results) else EXIT_FAILED)


def _console():
    from rich.console import Console
    console = Console()
    return console if console.is_terminal else Console(width=140)   # logs and pipes: no wrapping at 80 columns


def compile_mode(submission, archs) -> int:
    """Build the submission's CUDA sources with nvcc (no GPU needed); fail on a build error, a missing
    tensor-core instruction or any register spill."""
    from arena.compile import CompileError, compile_submission, render

    if not os.path.isfile(submission):
        fail_setup(f"no submission file at {submission} (use --submission PATH)", EXIT_USAGE)
    builds, problems = [], []
    for arch in archs:
        try:
            builds += compile_submission(submission, arch)
        except CompileError as error:
            problems.append(str(error))
    console = _console()
    if builds:
        render(console, builds)
    problems += [p for b in builds for p in b.problems()]
    for problem in dict.fromkeys(problems):      # the same parse error is not repeated per arch
        console.print(f"[red]✘ {problem}[/red]", markup=True)
    if not problems:
        console.print(f"[green]✔ {len(builds)} build(s): tensor-core instructions present, no spills[/green]")
    return EXIT_OK if not problems else EXIT_FAILED


def _take_secret_seed(cli_seed):
    """The secret seed leaves the environment before any child process exists (and, re-exec'd by
    arena.integrity.reexec_without_secret, it is not in /proc/<pid>/environ either)."""
    from arena.integrity import take_handed_seed
    raw = take_handed_seed()
    if raw is None:
        return cli_seed
    try:
        return int(raw)
    except ValueError:
        fail_setup(f"POPCORN_SEED must be an integer, got {raw!r}", EXIT_SPEC)


def run_mode(mode, task, indexed, submission, timeout, max_runs, max_time, popcorn_fd):
    import torch
    from arena.modes import CaseResult, Evaluator, Limits
    from arena.report import system_info
    from arena.runner import Worker, WorkerFailure

    from arena import integrity, report  # noqa: F401  (imported before the worker exists: it can write files)
    import rich.console, rich.table  # noqa: F401,E401
    hardening = integrity.harden_parent()
    if popcorn_fd is not None:
        os.set_inheritable(int(popcorn_fd), False)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        click.echo("notice: no CUDA GPU found: running on the CPU (exact emulated reference, wall-clock timing)",
                   err=True)
    ranked = mode == "leaderboard"
    limits = Limits(case_timeout=timeout,
                    max_runs=max_runs or (1000 if ranked else 200) // (1 if device == "cuda" else 10),
                    max_wall=max_time or (30.0 if ranked else 10.0) / (1 if device == "cuda" else 5),
                    check_every=ranked)
    reference = task.import_reference()
    worker = Worker(os.path.abspath(submission), str(task.folder), device, import_timeout=max(timeout, 300.0))
    evaluator = Evaluator(reference, worker, device, limits)
    results, reports = [], {}
    try:
        import_error = None
        try:
            worker.start()
        except WorkerFailure as failure:
            import_error = str(failure)
        for index, case in indexed:
            if import_error:
                results.append(CaseResult(index=index, spec=case.spec, passed=False, error=import_error))
                continue
            if mode == "test":
                results.append(evaluator.test(index, case))
            elif mode == "diagnose":
                from arena.diagnose import diagnose_case
                result, reports[index] = diagnose_case(evaluator, index, case)
                results.append(result)
            elif mode == "profile":
                result, table = evaluator.profile(index, case)
                results.append(result)
                reports[index] = table
            else:
                results.append(evaluator.benchmark(index, case, case.extra.get("sol_us")))
                if ranked and not results[-1].passed:
                    break           # as the competition: a ranked run stops at the first failure
        evaluator.finish()                  # late writes to outputs already checked
    finally:
        worker.stop()
        integrity.sweep_children(keep=_multiprocessing_helpers())
    info = system_info()
    info["integrity"] = {"parent": hardening, "worker": worker.hardening}
    return results, reports, info


def _multiprocessing_helpers() -> set:
    """multiprocessing's own resource tracker: a child of ours that the final sweep must spare."""
    from multiprocessing import resource_tracker
    pid = getattr(getattr(resource_tracker, "_resource_tracker", None), "_pid", None)
    return {pid} if pid else set()


if __name__ == "__main__":
    from arena.integrity import reexec_without_secret
    reexec_without_secret()                 # POPCORN_SEED out of /proc/<pid>/environ before anything else
    main()
