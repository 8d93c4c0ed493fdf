"""One evaluation run, from the trusted parent: harden it, start the worker, run each case of the mode, end every
process the submission started. eval.py (the command line) calls `run_mode`; arena/modes.py holds what each
mode does with one case.
"""
from __future__ import annotations

import os
import sys
import time

from arena import sandbox
from arena.progress import Silent

CLEAN_SUBMISSION = os.path.join(os.path.dirname(os.path.abspath(__file__)), "clean_submission.py")


def notice(message: str):
    print(message, file=sys.stderr)


def _one_line(result) -> str:
    """A finished case in a few words for the progress line."""
    if not result.passed:
        return (result.diagnosis or result.error or "failed")[:120]
    if result.stats:
        return f"{result.stats.mean / 1e3:.2f} ± {result.stats.err / 1e3:.2f} µs over {result.stats.runs} samples"
    return ""


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


def run_mode(mode, task, indexed, submission, timeout, max_runs, max_time, popcorn_fd, sandboxed=True,
             timing_method=None, progress=None, figures=False, emulate_blackwell=False):
    sandboxed = sandboxed and os.environ.get("POPCORN_NCU") is None and \
        os.environ.get(sandbox.NO_SANDBOX_ENV) != "1"
    hardening = sandbox.harden_parent(sandboxed)
    if popcorn_fd is not None:
        os.set_inheritable(int(popcorn_fd), False)
    clock = time.perf_counter()
    if progress is not None:
        progress.starting(submission)
    # The worker starts now and imports torch while we do: only our code runs there until the hello
    # names the submission (worker.start() below), after everything the parent will ever run is imported.
    from arena.spawn import spawn_worker
    early = spawn_worker(os.path.abspath(submission), sandboxed, [str(task.folder)])
    try:
        return _run(mode, task, indexed, submission, timeout, max_runs, max_time, sandboxed, timing_method,
                    hardening, early, clock, progress or Silent(), figures, emulate_blackwell)
    finally:
        if progress is not None:
            progress.close()
        sandbox.end_all()                   # every descendant, before any result is written


def _run(mode, task, indexed, submission, timeout, max_runs, max_time, sandboxed, timing_method, hardening,
         early, clock, progress, figures, emulate_blackwell=False):
    import torch
    from arena.modes import WALL_CALLS, Evaluator, Limits
    from arena.results import CaseResult, RunInfo
    from arena.report import system_info
    from arena.runner import Worker, WorkerFailure

    # Everything the parent will ever run is imported (and rendered once) before the submission is: a
    # module loaded later could be one the submission rewrote.
    from arena import diagnose, figures, html_report, report  # noqa: F401
    report.warm_up(mode)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if emulate_blackwell and blackwell_emulation_problem(torch):
        raise EmulationUnavailable(blackwell_emulation_problem(torch))
    if device == "cpu":
        notice("notice: no CUDA GPU found: running on the CPU (exact emulated reference, wall-clock timing)")
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
                    sandboxed=sandboxed, spawned=early, emulate_blackwell=emulate_blackwell)
    clean = Worker(CLEAN_SUBMISSION, str(task.folder), device, import_timeout=max(timeout, 300.0),
                   sandboxed=sandboxed)
    evaluator = Evaluator(reference, worker, device, limits, progress=progress, figures=figures, clean=clean)
    results, reports, refused = [], {}, ""
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
            progress.case(index, case.spec, len(indexed), "generating inputs")
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
            progress.finished(index, results[-1].passed, _one_line(results[-1]))
            if ranked and not results[-1].passed:
                break               # as the competition: a ranked run stops at the first failure
        evaluator.finish()                  # late writes to outputs already checked
    finally:
        worker.stop()
        clean.stop()
    info = RunInfo(machine=system_info(), wall_s={**wall_s, "total": round(time.perf_counter() - clock, 3)},
                   integrity={"parent": hardening, "worker": worker.hardening}, notices=worker.notices,
                   refused=refused)
    return results, reports, info
