"""nvfp4-arena evaluator: `python eval.py {test,benchmark,leaderboard,profile} [SPECFILE]`.

With POPCORN_FD set (the competition's runner), it speaks the official protocol: `key: value` lines on that
file descriptor, times in ns, exit codes 0 / 112 (failed) / 113 (bad spec) / 2 (usage). Otherwise it reads
cases from task.yml (or SPECFILE) and prints a readable report.
"""
import os
import sys
import time

import click

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from arena import sandbox  # noqa: E402  (standard library only: safe before the re-exec)

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
@click.option("--max-runs", type=int, default=None, help="Most timed samples per benchmark case (a sample is N calls "
              "under the competition's timing); also caps the untimed check calls.")
@click.option("--max-time", type=float, default=None, help="Most seconds of timing per benchmark case.")
@click.option("--arch", "archs", multiple=True, type=click.Choice(("sm_90a", "sm_100a")),
              help="compile mode: the target(s) to build for (default both).")
@click.option("--expect", type=click.Choice(("mma", "none"), case_sensitive=False), default=None,
              help="compile mode: require tensor-core MMA instructions (default: as the task says).")
@click.option("--timing", "timing_method", type=click.Choice(("competition", "per-call")), default=None,
              help="competition: N distinct inputs back to back per sample, as the competition's eval.py times "
              "this task (default on a GPU); per-call: every call alone with a cold L2 (default on the CPU).")
@click.option("--no-sandbox", is_flag=True, help="Run the submission as this user, without isolation (needed "
              "to rank when the evaluator is not root; never for untrusted code).")
def main(mode, specfile, submission, task_dir, case_set, only, seed, json_path, timeout, max_runs, max_time, archs,
         expect, timing_method, no_sandbox):
    """Evaluate an NVFP4 submission: MODE is test, benchmark, leaderboard, profile, compile or diagnose."""
    if mode == "compile":
        sys.exit(compile_mode(submission, archs or ("sm_90a", "sm_100a"), expect, task_dir))
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
            task.check_cases(cases, f"spec file {specfile}")
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
    try:
        results, reports, info = run_mode(mode, task, indexed, submission, timeout, max_runs, max_time, popcorn_fd,
                                          sandboxed=not no_sandbox, timing_method=timing_method)
    except sandbox.Terminated as stop:
        click.echo(f"error: {stop}: the submission's processes were ended, nothing was reported", err=True)
        sys.exit(128 + stop.signum)
    except KeyboardInterrupt:
        click.echo("error: interrupted: the submission's processes were ended, nothing was reported", err=True)
        sys.exit(130)
    finally:
        sandbox.write_import_audit()
    info["static_warnings"] = [f.as_dict() for f in static]
    if info.get("refused"):
        click.echo(f"error: {info['refused']}", err=True)
    if popcorn_fd is not None:
        report.write_popcorn(int(popcorn_fd), report.popcorn_lines(mode, results, reports))
        report.echo_integrity(results, static, info.get("integrity"), info.get("notices"))   # stderr: protocol lines stay official
    else:
        report.render(_console(), mode, results, info, reports)
    if json_path:
        report.write_json(json_path, mode, task.name, submission, results, info, reports)
    sys.exit(EXIT_OK if all(r.passed for r in results) and not info.get("refused") else EXIT_FAILED)


def _console():
    from rich.console import Console
    console = Console()
    return console if console.is_terminal else Console(width=140)   # logs and pipes: no wrapping at 80 columns


def compile_mode(submission, archs, expect, task_dir) -> int:
    """Build the submission's CUDA sources with nvcc (no GPU needed), per arch built / not targeted / failed;
    fail on a build error, a register spill, or a missing tensor-core instruction where the task (or
    --expect mma) asks for one."""
    from arena.compile import CompileError, compile_submission, report
    from arena.taskdef import TaskError, load_task

    if not os.path.isfile(submission):
        fail_setup(f"no submission file at {submission} (use --submission PATH)", EXIT_USAGE)
    if expect is None:
        try:
            expect = "mma" if load_task(task_dir).expect_mma else "none"
        except TaskError as error:
            fail_setup(str(error), EXIT_SPEC)
    console = _console()
    try:
        builds = compile_submission(submission, archs)
    except CompileError as error:
        console.print(f"✘ {error}", style="red", markup=False, highlight=False)
        return EXIT_FAILED
    return EXIT_OK if report(console, builds, expect.lower() == "mma") else EXIT_FAILED


def _take_secret_seed(cli_seed):
    """The secret seed leaves the environment before any child process exists (and, re-exec'd by
    arena.sandbox.reexec_without_secrets, neither POPCORN_SEED nor --seed is in /proc/<pid>/environ or
    cmdline). POPCORN_SEED wins over --seed, as the runner's own value."""
    handed = sandbox.take_handed_secrets()
    raw = handed.get("popcorn")
    if raw is None:
        if handed.get("cli") is None:
            return cli_seed
        try:
            return int(handed["cli"])
        except ValueError:
            fail_setup(f"--seed takes an integer, got {handed['cli']!r}", EXIT_USAGE)
    try:
        return int(raw)
    except ValueError:
        fail_setup(f"POPCORN_SEED must be an integer, got {raw!r}", EXIT_SPEC)


def run_mode(mode, task, indexed, submission, timeout, max_runs, max_time, popcorn_fd, sandboxed=True,
             timing_method=None):
    import torch
    from arena.modes import WALL_CALLS, Evaluator, Limits
    from arena.results import CaseResult
    from arena.report import system_info
    from arena.runner import Worker, WorkerFailure

    # Everything the parent will ever run is imported (and rendered once) before the worker exists: a
    # module loaded later could be one the submission rewrote.
    from arena import diagnose, report  # noqa: F401
    report.warm_up(mode)
    sandboxed = sandboxed and os.environ.get("POPCORN_NCU") is None and \
        os.environ.get(sandbox.NO_SANDBOX_ENV) != "1"
    hardening = sandbox.harden_parent(sandboxed)
    if popcorn_fd is not None:
        os.set_inheritable(int(popcorn_fd), False)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        click.echo("notice: no CUDA GPU found: running on the CPU (exact emulated reference, wall-clock timing)",
                   err=True)
    ranked = mode == "leaderboard"
    method = timing_method or ("competition" if device == "cuda" else "per-call")
    # Seconds of timing per case: a competition sample already averages N calls, so a benchmark stops
    # sooner (a whole benchmark of the shipped kernel in under 20 s on an H100); a ranked run takes longer.
    budget = 30.0 if ranked else (5.0 if method == "competition" and task.competition_calls > 1 else 10.0)
    limits = Limits(case_timeout=timeout,
                    max_runs=max_runs or (1000 if ranked else 200) // (1 if device == "cuda" else 10),
                    max_wall=max_time or budget / (1 if device == "cuda" else 5),
                    check_every=ranked, method=method,
                    calls_per_sample=task.competition_calls,
                    wall_calls=min(WALL_CALLS, max_runs) if max_runs is not None else WALL_CALLS)
    reference = task.import_reference()
    worker = Worker(os.path.abspath(submission), str(task.folder), device, import_timeout=max(timeout, 300.0),
                    sandboxed=sandboxed)
    evaluator = Evaluator(reference, worker, device, limits)
    results, reports, refused = [], {}, ""
    clock = time.perf_counter()
    wall_s = {"worker_start": 0.0, "cases": []}     # where the run's time went, in the JSON
    try:
        import_error = None
        try:
            worker.start()
        except WorkerFailure as failure:
            import_error = failure
        wall_s["worker_start"] = round(time.perf_counter() - clock, 3)
        if ranked and sandboxed and worker.isolation is not None and worker.isolation.weak:
            refused = f"not ranked: {worker.isolation.weak} (pass --no-sandbox to rank anyway, knowingly)"
        for index, case in indexed:
            case_clock = time.perf_counter()
            if import_error:
                results.append(CaseResult(index=index, spec=case.spec, passed=False, error=str(import_error),
                                          details=[import_error.traceback] if import_error.traceback else []))
                continue
            if mode == "test":
                results.append(evaluator.test(index, case))
            elif mode == "diagnose":
                result, reports[index] = diagnose.diagnose_case(evaluator, index, case)
                results.append(result)
            elif mode == "profile":
                result, table = evaluator.profile(index, case)
                results.append(result)
                reports[index] = table
            else:
                results.append(evaluator.benchmark(index, case, case.extra.get("sol_us")))
            wall_s["cases"].append(round(time.perf_counter() - case_clock, 3))
            if ranked and not results[-1].passed:
                break               # as the competition: a ranked run stops at the first failure
        evaluator.finish()                  # late writes to outputs already checked
    finally:
        worker.stop()
        sandbox.end_all()                   # every descendant, before any result is written
    info = system_info()
    info["integrity"] = {"parent": hardening, "worker": worker.hardening}
    info["notices"] = worker.notices
    info["refused"] = refused
    info["wall_s"] = {**wall_s, "total": round(time.perf_counter() - clock, 3)}
    return results, reports, info


if __name__ == "__main__":
    sandbox.reexec_without_secrets()        # POPCORN_SEED and --seed out of /proc/<pid> before anything else
    sandbox.start_import_audit()
    sandbox.stop_on_signals()               # SIGTERM/SIGHUP unwind like Ctrl-C: the worker never outlives us
    main()
