"""One benchmark case, run from the trusted parent (arena/run/evaluation.py) with the calls and checks of
arena/run/evaluator.py.

Timed windows of fresh inputs in the submission's worker, each beside the same window in the clean worker around
an empty call (the parent's clock floor, arena/clock/parent_clock.py); every output audited and checked as the
evaluator checks it; then sync-to-sync calls (the drain of work left on other streams) and the flags for times
that cannot be honest (arena/audit/reply_audit.py).
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict
from arena.audit import reply_audit
from arena.clock import gpustate, masking, timing
from arena.clock.parent_clock import ClockFloor, window_spin_us
from arena.report.results import CaseResult
from arena.run.limits import data_bytes
from arena.taskdef.nested import tensors_in
from arena.taskdef.specs import Case
from arena.run.evaluator import Evaluator
from arena.worker.client import Window, Worker, WorkerFailure


def benchmark_case(ev: Evaluator, index: int, case: Case, sol_us: float | None) -> CaseResult:
    """One benchmark case: the correctness call, a warm-up window, timed windows of the submission each beside the
    same window in the clean worker (the parent's clock floor), until the case's budget or its runs are spent;
    then the sync-to-sync calls and every flag for a time that cannot be honest."""
    ev.new_case()
    result = CaseResult(index=index, spec=case.spec, passed=False, sol_us=sol_us)
    limits = ev.limits
    try:
        # Warm-up and the obligatory correctness check, on the case's own seed.
        data = ev.generate(case.args)
        ev.progress.stage("running the correctness call")
        output, problem = ev._run_once(data, "the correctness call", result)
        if not problem:
            ev.progress.stage("checking against the reference")
        good, error, details = (False, problem, []) if problem else ev._check(data, output, result)
        if not good and problem:
            result.error = f"failed the correctness check before timing: {error}"
            if ev.some_groups_unchanged(problem, output):
                ev._diagnose(result, data, output, lambda: ev.generate(case.args))
            return result
        if not good:
            result.error, result.details = f"failed the correctness check before timing: {error}", details
            ev._diagnose(result, data, output, lambda: ev.generate(case.args))
            return result
        del data, output
        batch = _batch_size(ev.generate(case.args), ev.device)
        together = limits.method == "competition" and limits.calls_per_sample > 1
        result.timing = {"method": limits.method,
                         "calls_per_sample": limits.calls_per_sample if together else 1}
        samples, clean_samples, started, windows = [], [], time.perf_counter(), 0
        floor = ClockFloor(ev.device)
        # Where the case's wall time went (s): generating inputs, the timed windows of both workers on the
        # parent's clock, staging and collecting (shared memory), checking.
        spent = {"generate": 0.0, "worker": 0.0, "staging": 0.0, "check": 0.0}
        phases, window_log = [], []
        readings = [ev.gpu.read()] if ev.gpu else []
        ev.progress.timing(0, None, None)
        # One uncounted window first, the warm-up: the host time it reports sizes the GPU's work ahead of
        # every counted window of the case, once (a size that moved from window to window would move the
        # clean windows too, and their spread is the parent's measure of its own noise).
        host_ns, host_calls, warm, spin = None, 1, True, 0
        # A CPU call that takes a good part of the case's budget: the correctness call was its warm-up, and
        # the sync-to-sync calls are as few as the budget holds (a gemv call of seconds times 1, not 5).
        slow = ev._seen_per_call is not None and ev._seen_per_call > limits.max_wall / 4
        warm = not (slow and ev.device == "cpu")
        wall_calls = limits.wall_calls if not slow else \
            max(1, min(limits.wall_calls, int(limits.max_wall / ev._seen_per_call)))
        if slow and ev.device == "cpu":
            wall_calls = 0      # sync-to-sync calls compare with a GPU's event time: on a CPU, one more slow call
        _clean_worker(ev)                  # started before the clock of the case's budget runs
        while warm or not samples or not timing.should_stop(samples, time.perf_counter() - started,
                                                            limits.max_runs, limits.max_wall):
            # Competition: one window is one sample of N distinct inputs, each fresh (a cached result
            # cannot be replayed); per-call: one window holds several one-call samples.
            size = limits.calls_per_sample if together else min(batch, limits.max_runs - len(samples))
            size = 1 if warm and not together else size
            if not together and not warm and ev._seen_per_call:     # a window's calls fit what is left
                left = limits.max_wall - (time.perf_counter() - started)
                size = max(1, min(size, int(left / ev._seen_per_call)))
            mark = time.perf_counter()
            originals = [ev.generate_fresh(case.args) for _ in range(size)]
            labels = [f"timed call {windows * size + i}" for i in range(size)] if not warm else \
                [f"warm-up call {i}" for i in range(size)]
            spent["generate"] += time.perf_counter() - mark
            if ev.device == "cuda" and (warm or windows == 0):
                spin = ev.spin_sizer.size(window_spin_us(host_ns, host_calls, size, together))
            window = _window(ev, originals, result, together, spin)
            clean = _clean_window(ev, originals, together, spin, window.outputs)
            spent["worker"] += (window.elapsed_ns + clean.elapsed_ns) / 1e9
            spent["staging"] += window.staging_ns / 1e9
            phases.append((window.fields.get("phases_ns"), clean.fields.get("phases_ns")))
            times = window.times_ns
            if len(times) != (1 if together else size) or len(window.outputs) != size:
                raise WorkerFailure(f"the worker answered {len(times)} times and {len(window.outputs)} outputs "
                                    f"for {size} timed calls", replace=True)
            reported = times[0] * size if together else sum(times)
            host_ns, host_calls = window.fields.get("host_ns"), size
            mark = time.perf_counter()
            verified = ev._verify(labels, window, originals, result, first=warm or windows == 0)
            spent["check"] += time.perf_counter() - mark
            if not verified:
                return result
            if warm:
                warm, started = False, time.perf_counter()
                continue
            windows += 1
            samples += times
            clean_samples += clean.times_ns
            floor.add(size, window.elapsed_ns, clean.elapsed_ns, reported)
            if len(window_log) < WINDOW_LOG:
                window_log.append(_window_row(window, clean, reported))
            if not ev.progress.quiet:
                running = timing.summarize(samples)
                ev.progress.timing(len(samples), running.mean, running.err)
            if ev.gpu:
                readings.append(ev.gpu.read())
        # Untimed: sync-to-sync calls (the drain), in a request of its own.
        wall_fields = {}
        if wall_calls:
            wall_originals = [ev.generate_fresh(case.args) for _ in range(wall_calls)]
            wall = ev._call("wall", wall_originals, result)
            if not ev._verify([f"wall-clock call {i}" for i in range(wall_calls)], wall, wall_originals,
                                result):
                return result
            wall_fields = wall.fields
        ordered = sorted(clean_samples) or [0.0]
        result.timing["empty_ns"] = [round(t, 1) for t in clean_samples[:16]]
        result.timing["parent_clock_ns_per_call"] = round(floor.per_call_ns(), 1)
        result.timing["parent_clock_bound"] = round(floor.bound_share(), 4)
        result.timing["window_phases_us"] = median_phases(phases)
        result.timing["windows_us"] = window_log
        extras = {"drain_ns": wall_fields.get("drain_ns", []), "sync_ns": wall_fields.get("sync_ns"),
                  "empty_ns": ordered[len(ordered) // 2]}
        clock = floor.problem()
        result.wall = timing.summarize(wall_fields["wall_ns"]) if wall_fields.get("wall_ns") else None
        result.stats = timing.summarize(samples)
        result.samples_ns = list(samples) if ev.figures else []
        result.timing["harness_s"] = {"timing_loop": round(time.perf_counter() - started, 3),
                                      **{k: round(v, 3) for k, v in spent.items()}}
        impossible = ([clock] if clock else []) + timing_warnings(result, {**extras, "samples": samples})
        result.warnings = impossible + result.warnings
        if impossible:
            result.untrusted = impossible[0]
            if limits.check_every:          # ranked: a timing that cannot be honest is never ranked
                result.error = f"the timing cannot be trusted: {impossible[0]}"
                return result
        result.passed = True
        clocks = gpustate.summarize(readings, floor.span_ns / 1e6)
        if clocks:
            result.timing["gpu"] = asdict(clocks)
            result.warnings += clocks.warnings()
    except WorkerFailure as failure:
        result.error = str(failure)
        result.details = [failure.traceback] if failure.traceback else []
    except Exception as error:
        result.error = f"evaluator error: {type(error).__name__}: {error}"
    return result


def _clean_worker(ev: Evaluator) -> Worker:
    if ev.clean is None:
        raise WorkerFailure("no clean worker to time empty windows in")
    if ev.clean.process is None:
        ev.clean.start()
    return ev.clean


def _window(ev: Evaluator, originals: list, result, together: bool, spin: int) -> Window:
    """One timed window of the submission (arena/worker/client.py Worker.time_window)."""
    return ev._exchange(lambda: ev.worker.time_window(originals, ev.timeout(originals), together=together,
                                                          spin=spin), originals, result)


def _clean_window(ev: Evaluator, originals: list, together: bool, spin: int, outputs: list) -> Window:
    """The same window in the clean worker around an empty call, digesting as many bytes as the
    submission's outputs, laid out as they are: the parent's clock baseline (arena/clock/parent_clock.py). Its
    inputs are staged once per case (it computes nothing from them)."""
    clean = _clean_worker(ev)
    layouts = [masking.layout_of(t) for o in outputs for _, t in tensors_in(o)]
    restage = not ev._clean_staged or clean.staged is None or len(clean.staged) != len(originals)
    ev._clean_staged = True
    return clean.time_window(originals, ev.timeout(originals), together=together, spin=spin,
                             empty=True, digest_like=layouts, restage=restage)


def _batch_size(sample, device: str) -> int:
    """Distinct inputs per timed batch: as many as fit in a modest memory budget, 1 to 20."""
    budget = (1 << 30) if device == "cuda" else (64 << 20)
    return max(1, min(20, budget // max(1, data_bytes(sample))))


WINDOW_LOG = 32     # the first windows of a case, each in the JSON (what the parent's floor is made of)


def _us(value) -> float | None:
    """A worker's figure in ns as µs, or None when it is not a plain finite number (the worker says what it
    likes: these are shown, never used to rank, and must not break the case)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        shown = float(value) / 1e3
    except OverflowError:
        return None
    return round(shown, 1) if math.isfinite(shown) else None


def _window_row(window, clean, reported_ns: float) -> list:
    """One window as the JSON shows it (us): the parent's clock on the submission's window and on the clean
    one, the reported total, then each worker's own account of its timed loop and of its host's enqueueing."""
    def loop(w):
        phases = w.fields.get("phases_ns")
        return _us(phases[0]) if isinstance(phases, list) and phases else None
    return [_us(window.elapsed_ns), _us(clean.elapsed_ns), _us(reported_ns), loop(window), loop(clean),
            _us(window.fields.get("host_ns")), _us(clean.fields.get("host_ns"))]


def median_phases(phases: list) -> dict:
    """The worker's own account of its windows (the timed loop with its synchronizations, reading the digest;
    µs, the median of each), beside the clean worker's: what explains a gap between the reported times and the
    parent's clock."""
    shown = {}
    for name, index in (("submission", 0), ("clean", 1)):
        rows = [[_us(x) for x in p[index]] for p in phases if isinstance(p[index], list) and len(p[index]) == 2]
        rows = [r for r in rows if None not in r]
        if rows:
            shown[name] = [sorted(r[i] for r in rows)[len(rows) // 2] for i in range(2)]
    return shown


def timing_warnings(result: CaseResult, extras: dict | None = None) -> list[str]:
    """Flags for times that cannot be honest (arena/audit/reply_audit.py timing_flags): faster than the B200 speed of
    light, the GPU still busy long after the call returned (work escaping the timed stream), or many calls
    no longer than an empty timed window (super-batch / replay)."""
    if not result.stats:
        return []
    extras = extras or {}
    samples = extras.get("samples") or [result.stats.median]
    wall = [result.wall.median] if result.wall else None
    return reply_audit.timing_flags(samples, result.sol_us, wall, extras.get("drain_ns"), extras.get("sync_ns"),
                                  extras.get("empty_ns"))
