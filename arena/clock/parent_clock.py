"""The parent's own clock as a floor under every ranked time (docs/integrity.md, "The parent's clock").

Each timed window is bracketed by the parent: from sending the key that unmasks its inputs to reading the
worker's times and its outputs' digest (arena/worker/client.py Worker.time_window). Right after it, a clean worker
(one that never imported the submission) runs the same window around an empty call: the same inputs unmasked,
the same L2 flush and work ahead of the window, the same digest, the same messages. What the submission's window took
beyond the clean one is the work of its calls, measured where the submission cannot reach: the worker's
reported times may refine that figure, never undercut it by more than the tolerance below.

Used by arena/run/evaluator.py and arena/run/benchmark.py; standard library only at import (torch where the GPU is measured).
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

# A reported total may fall this far below the parent's floor before the timing is refused: a forged time
# ranks at most this much below what the parent's clock saw (the honest spread on an H100 is in
# docs/integrity.md). The CPU's clock is shared with everything else on the machine: looser there.
TOLERANCE = {"cuda": 0.10, "cpu": 0.35}
# Plus this much per window (ns): the jitter of two socket round trips and a synchronize, which a window of a
# few microseconds (gemv: one call per window) cannot average away.
SLACK_PER_WINDOW_NS = {"cuda": 10e3, "cpu": 0.5e6}
# Plus this many standard deviations of the floor's own noise, measured on the clean worker's windows (a GPU's
# windows are short beside a busy host's jitter; the CPU's tolerance is wide enough as it is).
NOISE_SIGMAS = {"cuda": 3.0, "cpu": 0.0}
# ... but never more than this share of the floor: a submission that claims a long host time gets a long work
# ahead of its windows, whose jitter widens the spread; this caps what that can buy (docs/integrity.md).
NOISE_CAP = 0.25

SPIN_FLOOR_US = 20.0        # the GPU's work ahead of each window, at least
SPIN_HOST_FACTOR = 2.0      # plus this many times the host's time to enqueue the window behind it
SPIN_CAP_US = 50_000.0      # and at most this (the competition's 62.5 GiB randn flush takes ~37 ms)


def window_spin_us(host_ns: float | None, calls_before: int, calls: int, together: bool) -> float:
    """How long the GPU works ahead of a window (ahead of each call, per call): long enough for the host to
    enqueue the window behind that work, so the events time the GPU alone, as the competition's harness does
    behind its long flush. `host_ns`: the host's time enqueuing the previous window of `calls_before` calls, as
    the worker reported it. The claim cannot buy the submission time: the wait is a matrix product in both
    workers (arena/clock/timing.py busy_spin), not an idle GPU, so its own work on another stream meanwhile
    lengthens it and the parent's clock sees that."""
    per_call_us = max(host_ns or 0.0, 0.0) / 1e3 / max(calls_before, 1)
    head_start = per_call_us * (calls if together else 1)
    return min(SPIN_FLOOR_US + SPIN_HOST_FACTOR * head_start, SPIN_CAP_US)


class SpinSizer:
    """Turns a wait in microseconds into the size of the bf16 matrix product that takes that long on this GPU,
    from the parent's own measurement of the product's rate (once per run)."""

    def __init__(self):
        self.flop_per_us: float | None = None

    def size(self, spin_us: float) -> int:
        if self.flop_per_us is None:
            self.flop_per_us = _bf16_flop_per_us()
        edge = (max(spin_us, 0.0) * self.flop_per_us / 2) ** (1 / 3)
        return max(128, int(round(edge / 128)) * 128)


def _bf16_flop_per_us(edge: int = 4096) -> float:
    import torch
    a = torch.ones(edge, edge, dtype=torch.bfloat16, device="cuda")
    out = torch.empty_like(a)
    times = []
    for _ in range(6):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.mm(a, a, out=out)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return 2 * edge**3 / sorted(times[1:])[len(times[1:]) // 2]


@dataclass
class ClockFloor:
    """The sums over one case's windows."""
    device: str
    calls: int = 0
    windows: int = 0
    span_ns: float = 0.0        # the submission's windows, on the parent's clock
    clean_ns: float = 0.0       # the clean worker's matching windows, on the parent's clock
    reported_ns: float = 0.0    # the time of every call, as the worker reported it
    clean_spans: list = field(default_factory=list)     # each clean window, for the clock's own noise

    def add(self, calls: int, span_ns: float, clean_ns: float, reported_ns: float):
        self.calls += calls
        self.windows += 1
        self.span_ns += span_ns
        self.clean_ns += clean_ns
        self.reported_ns += reported_ns
        self.clean_spans.append(clean_ns)

    def floor_ns(self) -> float:
        """What the case's calls cost beyond empty calls, on the parent's clock."""
        return max(self.span_ns - self.clean_ns, 0.0)

    def per_call_ns(self) -> float:
        return self.floor_ns() / max(self.calls, 1)

    def allowance_ns(self) -> float:
        """How far below the parent's floor (summed over the case) the reported total may fall: the tolerance,
        the fixed slack per window, and three standard deviations of the floor's own noise (the spread of the
        clean worker's windows, for the difference of two such windows, summed over the case)."""
        tolerance = TOLERANCE.get(self.device, TOLERANCE["cpu"])
        slack = SLACK_PER_WINDOW_NS.get(self.device, SLACK_PER_WINDOW_NS["cpu"]) * self.windows
        noise = 0.0
        sigmas = NOISE_SIGMAS.get(self.device, 0.0)
        floor = self.floor_ns()
        if sigmas and len(self.clean_spans) >= 2:
            noise = sigmas * statistics.stdev(self.clean_spans) * math.sqrt(2 * len(self.clean_spans))
        return tolerance * floor + slack + min(noise, NOISE_CAP * floor)

    def bound_share(self) -> float:
        """The allowance as a share of the parent's floor: how much better than the parent's clock a forged
        time could rank in this case (reported in the JSON beside the figure)."""
        floor = self.floor_ns()
        return self.allowance_ns() / floor if floor else 1.0

    def problem(self) -> str:
        """One line when the reported times undercut the parent's floor by more than the allowance."""
        if not self.calls:
            return ""
        if self.reported_ns >= self.floor_ns() - self.allowance_ns():
            return ""
        return (f"the worker reported {self.reported_ns / self.calls / 1e3:.2f} us per call, but the evaluator's "
                f"own clock saw {self.per_call_ns() / 1e3:.2f} us per call beyond an empty call in a clean worker "
                f"(timing bent in the worker?)")
