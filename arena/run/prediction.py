"""predict mode's work on one case: the checked, emulated call and its counts; then, for a call that issued no
emulated MMA (it ran at about this GPU's own speed), the case timed as `benchmark` times it, briefly, and for one
that did, the host time of a few more calls (what runs on the CPU around the emulated kernels, which a B200 spends
too); then the B200 time from arena/predict/b200.py."""
from __future__ import annotations

from dataclasses import replace

from arena.predict import b200
from arena.report.results import CaseResult
from arena.run.benchmark import benchmark_case
from arena.run.evaluator import Evaluator
from arena.taskdef.specs import Case

NATIVE_TIMING_S = 2.0       # seconds of timing per natively run case: a median, not a ranking
NATIVE_RUNS = 100
HOST_CALLS = 2              # calls timed on the host after the checked one; the least CPU time counts


def predict_case(ev: Evaluator, index: int, case: Case, task_name: str, dram_gbps: float | None) -> CaseResult:
    """The case checked as `test` checks it, with its predicted B200 time (a wrong result gets none: its work is
    not the task's). `dram_gbps`: this GPU's bandwidth (None on a machine where nothing is timed)."""
    result = ev.test(index, case)
    if not result.passed:
        return result
    try:
        work = b200.WorkCounts.from_reply(ev.work_counts) if ev.work_counts is not None else None
    except ValueError as error:
        result.prediction = {"b200_us": None, "rests_on": f"no prediction: {error}"}
        return result
    native = host_us = None
    if work is not None and dram_gbps and b200.runs_natively(work):
        native, why = _timed_here(ev, index, case, dram_gbps)
        if native is None:
            result.warnings.append(f"the natively run call was not timed ({why}): predicted from its counts")
        elif why:
            result.warnings.append(f"the time here that predicts this case may be off: {why}")
    elif work is not None and work.mmas and dram_gbps:
        host_us, why = _host_time(ev, case, result)
        if host_us is None:
            result.warnings.append(f"the call's host time was not measured ({why}): a fitted per-call cost "
                                   "stands in")
    result.prediction = b200.predict(task_name, case.args, work, native, host_us).as_dict()
    return result


def _host_time(ev: Evaluator, case: Case, result: CaseResult) -> tuple[float | None, str]:
    """The least CPU time the submission's thread spent inside one call, in µs, over HOST_CALLS calls; None and
    why when it cannot stand for the host work: a call that returned only once its emulated kernels had finished
    waited for them inside (a synchronize, a copy to the host), and that wait is the emulation's, not a B200's."""
    try:
        reply = ev._call("host", [ev.generate(case.args) for _ in range(HOST_CALLS)], result)
    except Exception as error:          # advice only: the checked call's verdict stands
        return None, f"{type(error).__name__}: {error}"
    cpu, returned, drain = (reply.fields.get(k, []) for k in ("call_cpu_ns", "return_ns", "drain_ns"))
    if not (len(cpu) == len(returned) == len(drain) == HOST_CALLS):
        return None, "the reply held no host times"
    if any(d < r for d, r in zip(drain, returned)):
        return None, "the call waits for its own GPU work before it returns"
    return min(cpu) / 1e3, ""


def _timed_here(ev: Evaluator, index: int, case: Case, dram_gbps: float) -> tuple[b200.NativeTiming | None, str]:
    kept = ev.limits
    ev.limits = replace(kept, max_wall=NATIVE_TIMING_S, max_runs=NATIVE_RUNS)
    try:
        timed = benchmark_case(ev, index, case, None)
    finally:
        ev.limits = kept
    if not timed.passed or timed.stats is None:
        return None, timed.error or "no timed call"
    # A time the parent's clock doubts (another process on the GPU, host work beyond the GPU's) still predicts:
    # a prediction is advice, never a ranking; the doubt goes with it as a warning.
    return b200.NativeTiming(timed.stats.median / 1e3, dram_gbps), timed.untrusted
