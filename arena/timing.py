"""Timing on the GPU (CUDA events) and the CPU (wall clock), and the statistics reported.

Two methods (docs/timing.md):
- "competition" (the default): one sample is N distinct inputs called back to back after one L2 flush, the
  span between two events divided by N, as the competition's eval.py does for the task (N = 50 for gemm and
  dual gemm, 15 for group gemm, 1 for gemv). A fixed per-call latency is paid once per sample, not per call.
- "per-call": one sample is one call alone on a fresh input with a cold L2.
In both, before the timed window the harness enqueues an L2 flush (a write over 2x the real L2) and a GPU-side
spin long enough for the host to enqueue the whole window behind it; the start event is recorded after the
spin, so the GPU never waits for the host inside the timed window.
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


def gpu_spin(microseconds: float):
    """Keep the GPU busy for about `microseconds` so the host can enqueue work behind it."""
    if microseconds > 0:
        torch.cuda._sleep(int(microseconds * _cycles_per_us()))


_clock_cache: list[float] = []


def _cycles_per_us() -> float:
    if not _clock_cache:
        rate_khz = getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "clock_rate", 0)
        _clock_cache.append(rate_khz / 1000 if rate_khz else 1800.0)
    return _clock_cache[0]


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


def time_calls_gpu(fn, inputs: list, spin_us: float) -> tuple[list, list[float]]:
    """Call fn(x) for each input with a cold L2; returns outputs and per-call GPU times in ns."""
    flush = l2_flush_buffer()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in inputs]
    outputs = []
    torch.cuda.synchronize()
    for x, (start, end) in zip(inputs, events):
        flush.zero_()
        gpu_spin(spin_us)
        start.record()
        outputs.append(fn(x))
        end.record()
    torch.cuda.synchronize()
    return outputs, [start.elapsed_time(end) * 1e6 for start, end in events]


def time_together_gpu(fn, inputs: list, spin_us: float, settle=None) -> tuple[list, list[float]]:
    """The competition's method: one flush, then every input back to back between two events; returns the
    outputs and one sample, the span divided by the number of calls (ns). `settle()` runs after the last
    call, inside the window, before anything else of the harness (the worker's guard)."""
    flush = l2_flush_buffer()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    flush.zero_()
    gpu_spin(spin_us)
    start.record()
    outputs = [fn(x) for x in inputs]
    if settle:
        settle()
    end.record()
    torch.cuda.synchronize()
    return outputs, [start.elapsed_time(end) * 1e6 / max(len(inputs), 1)]


def time_together_wall(fn, inputs: list, sync, settle=None) -> tuple[list, list[float]]:
    """The competition's method on the CPU: every input back to back between two synchronized clock reads
    (`settle()` as in time_together_gpu)."""
    sync()
    t0 = time.perf_counter_ns()
    outputs = [fn(x) for x in inputs]
    if settle:
        settle()
    sync()
    return outputs, [float(time.perf_counter_ns() - t0) / max(len(inputs), 1)]


def time_calls_wall(fn, inputs: list, sync) -> tuple[list, list[float]]:
    """Call fn(x) for each input, timing each call from a synchronized start to a synchronized end (ns)."""
    outputs, times = [], []
    for x in inputs:
        sync()
        t0 = time.perf_counter_ns()
        outputs.append(fn(x))
        sync()
        times.append(float(time.perf_counter_ns() - t0))
    return outputs, times
