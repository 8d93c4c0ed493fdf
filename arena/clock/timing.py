"""Timing on the GPU (CUDA events) and the CPU (wall clock), and the statistics reported.

Two methods (docs/timing.md):
- "competition" (the default): one sample is N distinct inputs called back to back after one L2 flush, the
  span between two events divided by N, as the competition's eval.py does for the task (N = 50 for gemm and
  dual gemm, 15 for group gemm, 1 for gemv). A fixed per-call latency is paid once per sample, not per call.
- "per-call": one sample is one call alone on a fresh input with a cold L2.
In both, before the timed window the harness enqueues an L2 flush (a write over 2x the real L2) and a matrix
product long enough for the host to enqueue the whole window behind it (arena/clock/parent_clock.py sizes it); the
start event is recorded after it, so the GPU never waits for the host inside the timed window.
"""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, asdict

import torch

_flush_buffers: dict[int, torch.Tensor] = {}
def l2_flush_buffer(device=None) -> torch.Tensor:
    """A buffer twice the size of the device's L2 (one per device, allocated once)."""
    index = torch.cuda.current_device() if device is None else torch.device(device).index or 0
    if index not in _flush_buffers:
        l2_bytes = torch.cuda.get_device_properties(index).L2_cache_size or 64 * 2**20
        _flush_buffers[index] = torch.empty(2 * l2_bytes // 4, dtype=torch.int32, device=f"cuda:{index}")
    return _flush_buffers[index]


def clear_l2_cache():
    """Evict the L2 by writing over twice its size (enqueued on the current stream)."""
    l2_flush_buffer().zero_()


_spin_buffers: dict[int, tuple] = {}


def prepare_spin(size: int):
    """Allocate the spin's matrices and run the product once, when the window's inputs are staged: an
    allocation or a library's first launch inside the window would be host time the clock charges to it."""
    if size <= 0 or size in _spin_buffers:
        return
    _spin_buffers.clear()                       # one size at a time: they can be large
    a = torch.ones(size, size, dtype=torch.bfloat16, device="cuda")
    _spin_buffers[size] = (a, a.clone(), torch.empty_like(a))
    busy_spin(size)
    torch.cuda.synchronize()


def busy_spin(size: int):
    """Keep the GPU working while the host enqueues the timed window: one size x size bf16 matrix product,
    the parent's choice (arena/clock/parent_clock.py spin_size). Work, not an idle wait: a submission's work on
    another stream meanwhile would have to share the GPU with it and lengthen it, so the parent's clock
    still sees that work (torch.cuda._sleep leaves the GPU idle, and anything could run there unseen)."""
    if size <= 0:
        return
    if size not in _spin_buffers:
        prepare_spin(size)
    a, b, c = _spin_buffers[size]
    torch.mm(a, b, out=c)


@dataclass
class Stats:
    """All times in nanoseconds, like the competition's `benchmark.N.*` keys."""
    runs: int
    mean: float
    std: float
    err: float
    best: float
    worst: float
    median: float

    def as_dict(self) -> dict:
        return asdict(self)


def summarize(samples_ns: list[float]) -> Stats:
    runs = len(samples_ns)
    mean = statistics.fmean(samples_ns)
    std = statistics.stdev(samples_ns) if runs > 1 else 0.0
    return Stats(runs=runs, mean=mean, std=std, err=std / math.sqrt(runs), best=min(samples_ns),
                 worst=max(samples_ns), median=statistics.median(samples_ns))


def should_stop(samples_ns: list[float], wall_s: float, max_runs: int, max_wall_s: float,
                min_runs: int = 10) -> bool:
    """The competition's rule in spirit: enough runs and a precise mean, or out of budget."""
    if len(samples_ns) >= max_runs or wall_s >= max_wall_s:
        return True
    if len(samples_ns) < min_runs:
        return False
    stats = summarize(samples_ns)
    return stats.err / stats.mean < 0.001 or stats.mean * stats.runs > max_wall_s * 1e9


def time_calls_gpu(fn, inputs: list, spin: int, prepare=None, finish=None) -> tuple[list, list[float], float]:
    """Call fn(x) for each input with a cold L2; returns outputs, per-call GPU times in ns, and the host's time
    from the first work ahead to the last call enqueued (ns). `prepare()` is enqueued behind the first work
    ahead (the unmasking of the inputs), `finish(outputs)` behind the last call (their digest): the host work
    of both overlaps the GPU's."""
    flush = l2_flush_buffer()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in inputs]
    outputs = []
    torch.cuda.synchronize()
    t0 = time.perf_counter_ns()
    for i, (x, (start, end)) in enumerate(zip(inputs, events)):
        busy_spin(spin)
        if i == 0 and prepare:
            prepare()
        flush.zero_()
        start.record()
        outputs.append(fn(x))
        end.record()
    host = float(time.perf_counter_ns() - t0)
    if finish:
        finish(outputs)
    torch.cuda.synchronize()
    return outputs, [start.elapsed_time(end) * 1e6 for start, end in events], host


def time_together_gpu(fn, inputs: list, spin: int, settle=None, prepare=None,
                      finish=None) -> tuple[list, list[float], float]:
    """The competition's method: one flush, then every input back to back between two events; returns the
    outputs, one sample (the span divided by the number of calls, ns) and the host's time from the work ahead
    to the last call enqueued (ns). `settle()` runs after the last call, inside the window, before anything
    else of the harness (the worker's guard); `prepare` and `finish` as in time_calls_gpu."""
    flush = l2_flush_buffer()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    t0 = time.perf_counter_ns()
    busy_spin(spin)
    if prepare:
        prepare()
    flush.zero_()
    start.record()
    outputs = [fn(x) for x in inputs]
    host = float(time.perf_counter_ns() - t0)
    if settle:
        settle()
    end.record()
    if finish:
        finish(outputs)
    torch.cuda.synchronize()
    return outputs, [start.elapsed_time(end) * 1e6 / max(len(inputs), 1)], host


def time_together_wall(fn, inputs: list, sync, settle=None, prepare=None, finish=None) -> tuple[list, list[float]]:
    """The competition's method on the CPU: every input back to back between two synchronized clock reads
    (`settle()` as in time_together_gpu; `prepare()` before the clock starts, `finish(outputs)` after it stops)."""
    if prepare:
        prepare()
    sync()
    t0 = time.perf_counter_ns()
    outputs = [fn(x) for x in inputs]
    if settle:
        settle()
    sync()
    elapsed = float(time.perf_counter_ns() - t0)
    if finish:
        finish(outputs)
    return outputs, [elapsed / max(len(inputs), 1)]


def time_calls_wall(fn, inputs: list, sync, prepare=None, finish=None) -> tuple[list, list[float]]:
    """Call fn(x) for each input, timing each call from a synchronized start to a synchronized end (ns)."""
    if prepare:
        prepare()
    outputs, times = [], []
    for x in inputs:
        sync()
        t0 = time.perf_counter_ns()
        outputs.append(fn(x))
        sync()
        times.append(float(time.perf_counter_ns() - t0))
    if finish:
        finish(outputs)
    return outputs, times
