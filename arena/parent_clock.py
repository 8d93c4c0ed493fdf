"""The parent's own clock as a floor under every ranked time (docs/integrity.md, "The parent's clock").

Each timed window is bracketed by the parent: from sending the key that unmasks its inputs to reading the
worker's times and its outputs' digest (arena/runner.py Worker.time_window). Right after it, a clean worker
(one that never imported the submission) runs the same window around an empty call: the same inputs unmasked,
the same L2 flush and work ahead of the window, the same digest, the same messages. What the submission's window took
beyond the clean one is the work of its calls, measured where the submission cannot reach: the worker's
reported times may refine that figure, never undercut it by more than the tolerance below.

Used by arena/modes.py; standard library only at import (torch where the GPU is measured).
"""
from __future__ import annotations

from dataclasses import dataclass

# A reported total may fall this far below the parent's floor before the timing is refused: a forged time
# ranks at most this much below what the parent's clock saw (the honest spread on an H100 is in
# docs/integrity.md). The CPU's clock is shared with everything else on the machine: looser there.
TOLERANCE = {"cuda": 0.10, "cpu": 0.50}
# Plus this much per window (ns): the jitter of two socket round trips and a synchronize, which a window of a
# few microseconds (gemv: one call per window) cannot average away.
SLACK_PER_WINDOW_NS = {"cuda": 10e3, "cpu": 2e6}

SPIN_FLOOR_US = 20.0        # the GPU's work ahead of each window, at least
SPIN_HOST_FACTOR = 1.2      # plus this many times the host's head start the window needs
SPIN_CAP_US = 50_000.0      # and at most this (the competition's 62.5 GiB randn flush takes ~37 ms)


def window_spin_us(host_ns_per_call: float | None, gpu_ns_per_call: float | None, calls: int) -> float:
    """How long the GPU works ahead of a window: long enough for the host to stay ahead of the GPU through the
    window, so the events time the GPU alone, as the competition's harness does behind its long flush. The host
    needs a head start of one call, or, where it enqueues a call slower than the GPU runs one, of the whole
    difference over the window (from the host and GPU times per call the worker reported for its previous
    window). The claim cannot buy the submission time: the wait is a matrix product in both workers
    (arena/timing.py busy_spin), not an idle GPU, so its own work on another stream meanwhile lengthens it and
    the parent's clock sees that."""
    host = max(host_ns_per_call or 0.0, 0.0) / 1e3
    gpu = max(gpu_ns_per_call or 0.0, 0.0) / 1e3
    head_start = max(host, calls * (host - gpu))
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

    def add(self, calls: int, span_ns: float, clean_ns: float, reported_ns: float):
        self.calls += calls
        self.windows += 1
        self.span_ns += span_ns
        self.clean_ns += clean_ns
        self.reported_ns += reported_ns

    def per_call_ns(self) -> float:
        """What each call cost beyond an empty call, on the parent's clock."""
        return max(self.span_ns - self.clean_ns, 0.0) / max(self.calls, 1)

    def problem(self) -> str:
        """One line when the reported times undercut the parent's floor by more than the tolerance."""
        if not self.calls:
            return ""
        tolerance = TOLERANCE.get(self.device, TOLERANCE["cpu"])
        slack = SLACK_PER_WINDOW_NS.get(self.device, SLACK_PER_WINDOW_NS["cpu"]) * self.windows
        floor = max(self.span_ns - self.clean_ns, 0.0)
        if self.reported_ns >= (1 - tolerance) * floor - slack:
            return ""
        return (f"the worker reported {self.reported_ns / self.calls / 1e3:.2f} us per call, but the evaluator's "
                f"own clock saw {self.per_call_ns() / 1e3:.2f} us per call beyond an empty call in a clean worker "
                f"(timing bent in the worker?)")
