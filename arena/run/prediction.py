"""predict mode's work on one case: the checked, emulated call and its counts; then, for a call that issued no
emulated MMA (it ran at about this GPU's own speed), the case timed as `benchmark` times it, briefly; then the
B200 time from arena/predict/b200.py."""
from __future__ import annotations

from dataclasses import replace

from arena.predict import b200
from arena.report.results import CaseResult
from arena.run.benchmark import benchmark_case
from arena.run.evaluator import Evaluator
from arena.taskdef.specs import Case

NATIVE_TIMING_S = 2.0       # seconds of timing per natively run case: a median, not a ranking
NATIVE_RUNS = 100


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
    native = None
    if work is not None and dram_gbps and b200.runs_natively(work):
        native, why = _timed_here(ev, index, case, dram_gbps)
        if native is None:
            result.warnings.append(f"the natively run call was not timed ({why}): predicted from its counts")
        elif why:
            result.warnings.append(f"the time here that predicts this case may be off: {why}")
    result.prediction = b200.predict(task_name, case.args, work, native).as_dict()
    return result


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
