"""nvfp4-arena evaluator: `python eval.py {test,benchmark,leaderboard,profile,diagnose,compile} [SPECFILE]`, and
`python eval.py batch PATH...` for many submissions at once (on Ray).

With POPCORN_FD set (the competition's runner), it speaks the official protocol: `key: value` lines on that
file descriptor, times in ns, exit codes 0 / 112 (failed) / 113 (bad spec) / 2 (usage). Otherwise it reads
cases from task.yml (or SPECFILE) and prints a readable report.
"""
import os
import sys
from dataclasses import replace

import click

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# CUDA counts GPUs as nvidia-smi and the jail's device nodes do (arena/isolation/gpu_nodes.py): in PCI bus order.
os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")

# standard library only: safe before the re-exec
from arena.isolation import parent_guard, secret_seed  # noqa: E402
from arena.report.exit_codes import EXIT_FAILED, EXIT_NOT_RUN, EXIT_OK, EXIT_SPEC, EXIT_USAGE  # noqa: E402
from arena.batch.command import BATCH_CORRECTNESS_PER_GPU  # noqa: E402
from arena.run.plan import DEFAULT_CASE_SET  # noqa: E402


def fail_setup(message: str, code: int):
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def with_options(*options):
    """One decorator applying `options` in the order listed (as they show in --help)."""
    def apply(command):
        for option in reversed(options):
            command = option(command)
        return command
    return apply


case_options = with_options(      # every verb that runs cases of a task
        click.argument("specfile", required=False, type=click.Path(dir_okay=False)),
        click.option("--submission", default="submission.py", show_default=True, metavar="FILE",
                     help="The submission file to evaluate."),
        click.option("--task", "task_dir", default=None, metavar="DIR",
                     help="Task folder with task.yml (default: the folder of eval.py)."),
        click.option("--set", "case_set", type=click.Choice(("tests", "benchmarks", "robustness")), default=None,
                     help="Which cases of task.yml to run when no SPECFILE is given (default: tests for test and "
                     "diagnose, benchmarks for benchmark, leaderboard and profile)."),
        click.option("--only", default=None, metavar="N,N,...", help="Comma-separated case numbers to run, e.g. "
                     "0,3."),
        click.option("--seed", type=int, default=None, metavar="INTEGER", help="A secret seed to combine with each case's seed, "
                     "as in the competition's private runs."),
        click.option("--json", "json_path", default=None, type=click.Path(), metavar="FILE",
                     help="Also write the results to this JSON file (rewritten after every case)."),
        click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=None, metavar="SECONDS",
                     help="Seconds each request to the submission may take before it is killed as a hang "
                     "(default: fitted to the case: 30 s plus 2 s per MiB of inputs per call on the CPU, 0.05 s on "
                     "a GPU, or 20 times the case's slowest call so far; 300 s more for a first call that may "
                     "build a CUDA extension)."),
        click.option("--keep-going", is_flag=True, help="Run every case after a hang too (default: the cases "
                     "after a hang are not run: the same kernel hangs the same way)."),
        click.option("--diagnose-all", is_flag=True, help="Diagnose every failing case in full (default: the "
                     "first failing case in full; a later one whose wrong elements fall in the same pattern is "
                     "said to fail like it, and only a new pattern is diagnosed again)."),
        click.option("--strict", is_flag=True, help="Refuse an output whose dtype or strided layout differs from "
                     "the reference's (default: a warning, and the values decide, as in the competition)."),
        click.option("--no-sandbox", is_flag=True, help="Run the submission as this user, without isolation "
                     "(needed to rank when the evaluator is not root; never for untrusted code)."),
        click.option("--quiet", "-q", is_flag=True, help="No live progress on stderr."),
        click.option("--report", "report_path", default=None, type=click.Path(), metavar="FILE",
                     help="Also write a self-contained HTML report (verdicts, diagnoses, error heatmaps, timing "
                     "pictures) to this file."),
        click.option("--plots", "plots_dir", default=None, type=click.Path(), metavar="DIR",
                     help="Also write the report's pictures as PNG files into this folder."),
)

timing_options = with_options(    # the verbs that time
        click.option("--max-runs", type=int, default=None, help="Most timed samples per case (a sample is N "
                      "calls under the competition's timing); also caps the untimed check calls."),
        click.option("--max-time", type=float, default=None, help="Most seconds of timing per case (default: "
                     "5 under the competition method, 10 per call, 30 in a leaderboard)."),
        click.option("--timing", "timing_method", type=click.Choice(("competition", "per-call")), default=None,
                     help="competition: N distinct inputs back to back per sample, as the competition's eval.py "
                     "times this task (default on a GPU); per-call: every call alone with a cold L2 (default on "
                     "the CPU)."),
)


HELP_EPILOG = """\b
Exit codes:
  0    every case passed (and every requested file was written)
  112  a case failed, or a requested file could not be written
  113  a bad spec file or task.yml, or a case too big for its rules or this machine's memory
  2    a usage error (an unknown option, a missing file, an unwritable output path)
  128+N  stopped by signal N (130: Ctrl-C, 143: SIGTERM); the finished cases are still reported

\b
SPECFILE: one case per line, `key: value` pairs joined by `;`, as the competition writes them:
  m: 128; n: 256; k: 256; l: 1; seed: 1111
  values are integers, words, or lists of integers (`m: [96, 128]; g: 2`); blank lines are skipped;
  the keys and their bounds are the task's (task.yml `case_rules`); UTF-8 text.

\b
Default cases without SPECFILE: test and diagnose run task.yml's `tests`; benchmark, leaderboard and profile
its `benchmarks`; --set picks another list (robustness: data the official distributions never produce).
"""


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110},
             epilog=HELP_EPILOG)
def cli():
    """Evaluate an NVFP4 submission. With POPCORN_FD set, speaks the competition's protocol."""


emulation_option = click.option(
    "--emulate-blackwell", is_flag=True,
    help="On a Hopper GPU: build the submission's CUDA code for sm_100a and run its tcgen05 instructions in "
         "software (correctness only; never timed).")


@cli.command(short_help="Check the submission against the reference (default: task.yml's tests).")
@case_options
@emulation_option
def test(**options):
    """Check the submission against the reference on task.yml's `tests` (or SPECFILE's cases, or --set's)."""
    evaluate("test", options)


@cli.command(short_help="Check once, then time each case (default: task.yml's benchmarks).")
@case_options
@timing_options
def benchmark(**options):
    """Check once, then time each of task.yml's `benchmarks` (or SPECFILE's cases, or --set's)."""
    evaluate("benchmark", options)


@cli.command(short_help="Predict the B200 time of each case from an emulated run (default: the benchmarks).")
@case_options
def predict(**options):
    """On a Hopper GPU: run each of task.yml's `benchmarks` once under --emulate-blackwell, check it, and predict
    its B200 time from what the kernels issued (tcgen05 MMAs, TMA bytes, CTAs), with the parts it is made of; a
    call that issues no MMA (a CUDA-core GEMV) is also timed here, and predicted from that time.
    A model, not a measurement: docs/b200_prediction.md gives its constants, their sources and its error."""
    evaluate("predict", options)


@cli.command(short_help="A ranked benchmark: every output checked, stops at the first failure.")
@case_options
@timing_options
def leaderboard(**options):
    """A ranked benchmark: every timed output checked, stops at the first failure, refuses a weak sandbox."""
    evaluate("leaderboard", options)


@cli.command(short_help="One call per case under the PyTorch profiler (default: the benchmarks).")
@case_options
def profile(**options):
    """One call per case under the PyTorch profiler; prints its table."""
    evaluate("profile", options)


@cli.command(short_help="Why a submission is wrong: structured probes of its first failing case.")
@case_options
@emulation_option
def diagnose(**options):
    """Why a submission is wrong: probes with structured inputs, in plain words (no POPCORN protocol).
    Without SPECFILE or --only it first runs `test` on --set's cases (default: tests) and probes the first
    that fails, saying which; if every one passes, a small probe case."""
    evaluate("diagnose", options)


@cli.command("compile", short_help="Build the submission's CUDA sources with nvcc (no GPU needed).")
@click.option("--submission", default="submission.py", show_default=True, metavar="FILE",
              help="The submission file to build.")
@click.option("--task", "task_dir", default=None, metavar="DIR",
              help="Task folder with task.yml (default: the folder of eval.py).")
@click.option("--arch", "archs", multiple=True, type=click.Choice(("sm_90a", "sm_100a")),
              help="The target(s) to build for (default both).")
@click.option("--expect", type=click.Choice(("mma", "none"), case_sensitive=False), default=None,
              help="Require tensor-core MMA instructions (default: as the task says).")
@click.option("--emulate-blackwell", is_flag=True,
              help="Build the sm_100a code the way `test --emulate-blackwell` does (tcgen05 rewritten into software, "
                   "assembled for sm_90a): whether a Hopper GPU can run it, without one.")
def compile_command(submission, task_dir, archs, expect, emulate_blackwell):
    """Build the submission's CUDA sources with nvcc (no GPU needed): per arch built / not targeted / failed."""
    if emulate_blackwell:
        from arena.compile import EMULATED
        archs = (EMULATED,)
    sys.exit(compile_mode(submission, archs or ("sm_90a", "sm_100a"), expect, task_dir))


@cli.command(short_help="Evaluate many submissions in parallel on Ray (one GPU each).")
@click.argument("paths", nargs=-1, required=False, metavar="PATH...")
@click.option("--task", "task_dir", default=None, metavar="DIR",
              help="Task folder with task.yml (default: the folder of eval.py).")
@click.option("--mode", type=click.Choice(("test", "benchmark", "leaderboard")), default="test", show_default=True,
              help="What every submission gets: exactly the single `eval.py MODE` run.")
@click.option("--spec", "specfile", default=None, type=click.Path(dir_okay=False),
              help="A spec file of cases for every submission (default: the task's cases for the mode).")
@click.option("--manifest", default=None, type=click.Path(dir_okay=False), metavar="FILE",
              help="A tab-separated file naming submissions (column `file`) and, per file, its `task` folder, its "
              "`spec` file and the `expected` verdict (pass / fail / build_fail); the table says which agree.")
@click.option("--emulate-blackwell", is_flag=True, help="Every evaluation under --emulate-blackwell (a Hopper GPU "
              "runs the Blackwell kernels).")
@click.option("--per-gpu", type=click.IntRange(min=1), default=None, metavar="N",
              help=f"Evaluations at once on each GPU (default: 1 in the timed modes, which never share a GPU; "
              f"{BATCH_CORRECTNESS_PER_GPU} in test mode).")
@click.option("--jsonl", default="batch.jsonl", show_default=True, metavar="FILE", help="Rows stream here, one per submission; "
              "a row already there for the same content, task, mode and cases is not evaluated again.")
@click.option("--address", default=None, metavar="HOST:PORT", help="A Ray cluster to use (default: start one on this machine, over "
              "all its GPUs, or its cores without a GPU).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=None, metavar="SECONDS",
              help="Seconds each request to a submission may take before it is stopped (default: fitted to each "
              "case, as in a single run).")
@click.option("--report", "report_path", default=None, type=click.Path(dir_okay=False),
              help="Also write the ranking as a self-contained HTML file.")
@click.option("--gpus", type=click.IntRange(min=0), default=None,
              help="GPUs of this machine the local Ray instance offers (default: every GPU it finds; 0: "
              "evaluate on the cores). Not with --address.")
def batch(paths, task_dir, mode, specfile, manifest, emulate_blackwell, per_gpu, jsonl, address, timeout,
          report_path, gpus):
    """Evaluate many submissions (files, or folders of *.py files, or a --manifest) in parallel on Ray."""
    from arena.batch.command import run_batch_command
    from arena.run.plan import PlanError
    try:
        sys.exit(run_batch_command(paths, task_dir, mode, specfile, jsonl, address, timeout, report_path, gpus,
                                   manifest=manifest, emulate_blackwell=emulate_blackwell, per_gpu=per_gpu,
                                   console=_console(), err_console=_console(stderr=True)))
    except PlanError as error:
        fail_setup(str(error), error.code)


def evaluate(mode: str, given: dict):
    """Run `mode` as the command line `given` asks (click's values): choose the cases, build the run's
    RunOptions once, run, and report: POPCORN lines on POPCORN_FD, else a table (and JSON)."""
    from arena.run.evaluation import EmulationUnavailable, run_mode
    from arena.run.plan import PlanError, plan_run
    from arena.taskdef.definition import TaskError, task_named_elsewhere

    popcorn_fd = os.environ.pop("POPCORN_FD", None)      # the worker inherits neither the fd nor its number
    secret = _take_secret_seed(given["seed"])
    specfile, only, case_set = given["specfile"], given["only"], given["case_set"] or DEFAULT_CASE_SET[mode]
    try:
        task, options = plan_run(mode, given, case_set, secret, popcorn_fd)
    except PlanError as error:
        fail_setup(str(error), error.code)
    if mode == "diagnose" and not specfile and not only:    # the first failing case, unless one was chosen
        from arena.run.diagnose_cases import diagnose_cases
        try:
            options = replace(options, cases=tuple(diagnose_cases(task, options, case_set)))
        except PlanError as error:
            fail_setup(str(error), error.code)
    from arena.audit import static_checks
    static = static_checks.scan_text(options.submission.text, task.name)
    other = task_named_elsewhere(options.submission, task)
    if other:
        click.echo(f"notice: {other}", err=True)
    from arena.report.sinks import choose_sinks
    sinks = choose_sinks(popcorn_fd, static, given["json_path"], given.get("report_path"), given.get("plots_dir"),
                         console=None if popcorn_fd is not None else _console())
    try:
        outcome = run_mode(task, replace(options, sinks=tuple(sinks)))
    except TaskError as error:
        fail_setup(str(error), EXIT_SPEC)
    except EmulationUnavailable as error:
        fail_setup(str(error), EXIT_USAGE)
    except parent_guard.Terminated as stop:
        click.echo(f"error: {stop} before any case began: the submission's processes were ended", err=True)
        sys.exit(128 + stop.signum)
    except KeyboardInterrupt:
        click.echo("error: interrupted before any case began: the submission's processes were ended", err=True)
        sys.exit(130)
    finally:
        parent_guard.write_import_audit()
    info, results = outcome.info, outcome.results
    if info.stopped:
        _ignore_further_signals()   # the results of the cases that finished get written whole
    info.static_warnings = [f.as_dict() for f in static]
    if info.refused:
        click.echo(f"error: {info.refused}", err=True)
    written = all([sink.run_finished(outcome) for sink in sinks])      # every sink, even after one failed
    if info.stopped:
        click.echo(f"error: {info.stopped}: {len(results)} of {outcome.planned} cases finished and reported, "
                   f"{info.not_reached} not reached", err=True)
        sys.exit(128 + info.signal)
    if info.import_error and outcome.failed:
        click.echo(f"error: {info.import_error}", err=True)
    elif outcome.failed:
        click.echo(f"error: {outcome.failed} of {len(results)} cases failed", err=True)
    if outcome.not_run:
        first = next(r.not_run for r in results if r.not_run)
        click.echo(f"not judged: {outcome.not_run} of {len(results)} cases: {first}", err=True)
    if outcome.failed or info.refused or not written:
        sys.exit(EXIT_FAILED)
    sys.exit(EXIT_NOT_RUN if outcome.not_run else EXIT_OK)


def _ignore_further_signals():
    import signal
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)


def _console(stderr: bool = False):
    from rich.console import Console
    console = Console(stderr=stderr)
    # Logs and pipes: tables laid out in 140 columns, other lines never wrapped (a grep finds a whole phrase)
    return console if console.is_terminal else Console(stderr=stderr, width=140, soft_wrap=True)


def compile_mode(submission, archs, expect, task_dir) -> int:
    """Build the submission's CUDA sources with nvcc (no GPU needed), per arch built / not targeted / failed;
    fail on a build error, a register spill, or a missing tensor-core instruction where the task (or
    --expect mma) asks for one."""
    from arena.compile import CompileError, compile_submission, report
    from arena.taskdef.definition import TaskError, load_task

    if not os.path.isfile(submission):
        fail_setup(f"no submission file at {submission} (use --submission PATH)", EXIT_USAGE)
    if expect is None:
        try:
            expect = "mma" if load_task(task_dir).expect_mma else "none"
        except TaskError as error:
            fail_setup(str(error), EXIT_SPEC)
    console = _console()
    from arena.report.progress import Progress
    progress = Progress()
    progress.announce(f"reading the CUDA sources of {submission}")
    try:
        builds = compile_submission(submission, archs, step=progress.announce)
    except CompileError as error:
        progress.close()
        console.print(f"✘ {error}", style="red", markup=False, highlight=False)
        return EXIT_FAILED
    progress.close()
    return EXIT_OK if report(console, builds, expect.lower() == "mma") else EXIT_FAILED


def _take_secret_seed(cli_seed):
    """The secret seed leaves the environment before any child process exists (and, re-exec'd by
    arena.isolation.secret_seed.reexec_without_secrets, neither POPCORN_SEED nor --seed is in /proc/<pid>/environ or
    cmdline). POPCORN_SEED wins over --seed, as the runner's own value."""
    handed = secret_seed.take_handed_secrets()
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


if __name__ == "__main__":
    secret_seed.reexec_without_secrets()        # POPCORN_SEED and --seed out of /proc/<pid> before anything else
    parent_guard.start_import_audit()
    parent_guard.stop_on_signals()               # SIGTERM/SIGHUP unwind like Ctrl-C: the worker never outlives us
    cli()
