"""One evaluation run, from the trusted parent: harden it, start the worker, run each case of the mode, end every
process the submission started. eval.py (the command line) calls `run_mode`; arena/run/evaluator.py holds what each
mode does with one case.
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, replace

from arena.isolation import jail, parent_guard, processes
from arena.run.options import RunOptions
from arena.submission_file import SubmissionFile
from arena.report.progress import Progress, extensions_built_by, jit_kernels_in

CLEAN_SUBMISSION = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "clock", "clean_submission.py")


def notice(message: str):
    print(message, file=sys.stderr)


def _one_line(result) -> str:
    """A finished case in a few words for the progress line."""
    if not result.passed:
        return (result.diagnosis or result.error or "failed")[:120]
    predicted = result.prediction
    if predicted.get("b200_us"):
        how = "from its time on this GPU" if predicted.get("hopper_us") else f"{predicted['bound']}-bound"
        return f"B200 predicted {predicted['b200_us']:.2f} µs ({how})"
    if result.stats:
        s = result.stats
        if s.runs == 1:         # one sample has no spread to show
            return f"{s.mean / 1e3:.2f} µs from 1 sample (no error estimate)"
        return f"{s.mean / 1e3:.2f} ± {s.err / 1e3:.2f} µs over {s.runs} samples"
    return ""


def _not_run(index, case, import_error, hang):
    """A case the run did not evaluate: the submission never imported, or an earlier case hung."""
    from arena.report.results import CaseResult
    if import_error:
        return CaseResult(index=index, spec=case.spec, passed=False, error=str(import_error),
                          details=[import_error.traceback] if import_error.traceback else [])
    return CaseResult(index=index, spec=case.spec, passed=False,
                      error=f"not run: same hang as case {hang} (--keep-going runs every case)")


class EmulationUnavailable(RuntimeError):
    """One line: why --emulate-blackwell cannot run on this machine."""


def blackwell_emulation_problem(torch) -> str | None:
    """Why this machine cannot run --emulate-blackwell, or None: it needs a Hopper GPU (sm_90a)."""
    if not torch.cuda.is_available():
        return "--emulate-blackwell needs a Hopper GPU (sm_90a): no CUDA GPU was found"
    major, minor = torch.cuda.get_device_capability()
    name = torch.cuda.get_device_name()
    if major >= 10:
        return f"--emulate-blackwell is for Hopper GPUs: this {name} (sm_{major}{minor}) runs tcgen05 itself"
    if major != 9:
        return f"--emulate-blackwell needs a Hopper GPU (sm_90a); this is {name} (sm_{major}{minor})"
    return None


def run_mode(task, options: RunOptions):
    """Run `options.mode` on `options.cases`: a RunOutcome (results, reports, RunInfo). `options.timeout` None:
    each request's limit fits its case (arena/run/limits.py auto_timeout). After a hang the other cases are not
    run (`keep_going` runs them); SIGINT/SIGTERM end the run with the cases finished so far (RunInfo.stopped).
    Each of `options.sinks` gets the outcome after every case, so what is finished is written before the run
    ends. `first_failure`: stop after the first case that fails (diagnose's search for a case)."""
    sandboxed = options.sandboxed and os.environ.get("POPCORN_NCU") is None and \
        os.environ.get(jail.NO_SANDBOX_ENV) != "1"
    options = replace(options, sandboxed=sandboxed)
    processes.note_bystanders()             # processes below us before the run are not ours to end
    launch = Launch(hardening=parent_guard.harden_parent(sandboxed), clock=time.perf_counter())
    if options.popcorn_fd is not None:
        os.set_inheritable(int(options.popcorn_fd), False)
    progress = Progress(quiet=options.quiet)
    progress.starting(options.submission)
    # The worker starts now and imports torch while we do: only our code runs there until the hello
    # names the submission (worker.start() below), after everything the parent will ever run is imported.
    from arena.worker.spawn import spawn_worker
    launch.early = spawn_worker(options.submission, sandboxed, [str(task.folder)])
    launch.progress = progress
    try:
        return _run(task, options, launch)
    finally:
        progress.close()
        processes.end_started()             # what the evaluation started, before any result is written


@dataclass
class Launch:
    """What run_mode set up before the cases: the parent's hardening, the clock, the worker already starting."""
    hardening: list
    clock: float
    early: object = None                    # arena.worker.spawn.Spawned
    progress: object = None                 # arena.report.progress.Progress or Silent


def _run(task, options: RunOptions, launch: Launch):
    import torch
    from arena.run.benchmark import benchmark_case
    from arena.run.evaluator import Evaluator
    from arena.run.prediction import predict_case
    from arena.predict.bandwidth import dram_gbps as measure_dram_gbps
    from arena.run.limits import EMULATED_BUILD_ALLOWANCE_S, WALL_CALLS, Limits
    from arena.report.results import RunInfo, RunOutcome, mark_not_run
    from arena.report.terminal import system_info
    from arena.worker.client import Worker, WorkerFailure

    # Everything the parent will ever run is imported (and rendered once) before the submission is: a
    # module loaded later could be one the submission rewrote.
    from arena import diagnose  # noqa: F401
    from arena.report import figures, html_report, terminal  # noqa: F401
    mode, progress = options.mode, launch.progress
    terminal.warm_up(mode)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if options.emulate_blackwell and blackwell_emulation_problem(torch):
        raise EmulationUnavailable(blackwell_emulation_problem(torch))
    if device == "cpu":
        notice("notice: no CUDA GPU found: running on the CPU (exact emulated reference, wall-clock timing)")
    ranked = options.ranked
    method = options.timing_method or ("competition" if device == "cuda" else "per-call")
    # Seconds of timing per case: a competition sample already averages N calls, so a benchmark stops
    # sooner (a whole benchmark of the shipped kernel in under 20 s on an H100); a ranked run takes longer.
    budget = 30.0 if ranked else (5.0 if method == "competition" and task.competition_calls > 1 else 10.0)
    max_runs = options.max_runs
    limits = Limits(case_timeout=options.timeout,
                    max_runs=max_runs or (1000 if ranked else 200) // (1 if device == "cuda" else 10),
                    max_wall=options.max_time or budget / (1 if device == "cuda" else 5),
                    check_every=ranked, method=method,
                    calls_per_sample=task.competition_calls,
                    wall_calls=min(WALL_CALLS, max_runs) if max_runs is not None else WALL_CALLS,
                    diagnose_all=options.diagnose_all or options.mode == "diagnose", strict=options.strict,
                    emulated=options.emulate_blackwell)
    reference = task.import_reference()
    # predict: this GPU's DRAM bandwidth, for the calls that run natively here (arena/run/prediction.py)
    dram_gbps = measure_dram_gbps(torch) if mode == "predict" and device == "cuda" else None
    import_timeout = max(options.timeout or 0, EMULATED_BUILD_ALLOWANCE_S if options.emulate_blackwell else 300.0)
    worker = Worker(options.submission, str(task.folder), device, import_timeout=import_timeout,
                    sandboxed=options.sandboxed, spawned=launch.early, emulate_blackwell=options.emulate_blackwell)
    clean = Worker(SubmissionFile.read(CLEAN_SUBMISSION), str(task.folder), device, import_timeout=import_timeout,
                   sandboxed=options.sandboxed)
    evaluator = Evaluator(reference, worker, device, limits, progress=progress, figures=options.figures,
                          clean=clean)
    evaluator.builds = bool(extensions_built_by(options.submission.text))
    evaluator.builds_per_shape = bool(jit_kernels_in(options.submission.text))
    indexed = list(options.cases)
    outcome = RunOutcome(mode, task.name, options.submission.path, len(indexed))
    results, reports, refused = outcome.results, outcome.reports, ""

    def record():       # after every case: a stopped or killed run keeps what it finished
        for sink in options.sinks:
            sink.case_finished(outcome)

    wall_s = {"worker_start": 0.0, "cases": []}     # where the run's time went, in the JSON
    stopped, import_error, hang = "", None, None
    try:
        try:
            worker.start()
        except WorkerFailure as failure:
            import_error = failure
        wall_s["worker_start"] = round(time.perf_counter() - launch.clock, 3)
        if ranked and options.sandboxed and worker.isolation is not None and worker.isolation.weak:
            refused = f"not ranked: {worker.isolation.weak} (pass --no-sandbox to rank anyway, knowingly)"
        if import_error:
            progress.failed_to_start(str(import_error))
        for index, case in indexed:
            if import_error or hang is not None:
                results.append(mark_not_run(_not_run(index, case, import_error, hang)))
                record()
                continue
            case_clock = time.perf_counter()
            progress.case(index, case.spec, len(indexed), "generating inputs")
            if mode == "test":
                results.append(evaluator.test(index, case))
            elif mode == "predict":
                results.append(predict_case(evaluator, index, case, task.name, dram_gbps))
            elif mode == "diagnose":
                result, reports[index] = diagnose.diagnose_case(evaluator, index, case)
                results.append(result)
            elif mode == "profile":
                result, table = evaluator.profile(index, case)
                results.append(result)
                reports[index] = table
            else:
                results.append(benchmark_case(evaluator, index, case, case.extra.get("sol_us")))
            wall_s["cases"].append(round(time.perf_counter() - case_clock, 3))
            mark_not_run(results[-1])
            record()                        # written before the line says the case is done
            progress.finished(index, results[-1].passed, _one_line(results[-1]), results[-1].not_run)
            if evaluator.take_hang() and not options.keep_going:
                hang = index        # the same kernel hangs the same way: the other cases are not waited out
            if (ranked or options.first_failure) and not results[-1].passed:
                break               # as the competition: a ranked run stops at the first failure
        evaluator.finish()                  # late writes to outputs already checked
    except (KeyboardInterrupt, parent_guard.Terminated) as stop:
        stopped = str(stop) if isinstance(stop, parent_guard.Terminated) else "interrupted (SIGINT)"
        signum = getattr(stop, "signum", 2)
    finally:
        worker.stop()
        clean.stop()
    outcome.info = RunInfo(
        machine=system_info(), wall_s={**wall_s, "total": round(time.perf_counter() - launch.clock, 3)},
        integrity={"parent": launch.hardening, "worker": worker.hardening}, notices=worker.notices,
        refused=refused, stopped=stopped, signal=signum if stopped else 0,
        not_reached=len(indexed) - len(results) if stopped else 0,
        import_error=str(import_error) if import_error else "")
    return outcome
