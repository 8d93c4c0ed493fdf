"""The parent's own clock as a floor under every ranked time (docs/integrity.md, "The parent's clock").

Each timed window is bracketed by the parent: from sending the key that unmasks its inputs to reading the
worker's times and its outputs' digest (arena/runner.py Worker.time_window). Right after it, a clean worker
(one that never imported the submission) runs the same window around an empty call: the same inputs unmasked,
the same L2 flush and GPU-side wait, the same digest, the same messages. What the submission's window took
beyond the clean one is the work of its calls, measured where the submission cannot reach: the worker's
reported times may refine that figure, never undercut it by more than the tolerance below.

Used by arena/modes.py; standard library only.
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

SPIN_FLOOR_US = 20.0        # the GPU-side wait before each window, at least
SPIN_SHARE = 0.10           # plus this share of the previous window's reported time


def window_spin_us(previous_window_ns: float | None) -> float:
    """The GPU-side wait the parent grants before a window: long enough for the host to enqueue the first
    calls behind it. The GPU is idle meanwhile, so work on another stream could run there unseen by the
    events: the wait is a share of the previous window's *reported* time, so claiming a longer window to get
    more of it ranks the submission worse by more than it gains."""
    return SPIN_FLOOR_US + SPIN_SHARE * max(previous_window_ns or 0.0, 0.0) / 1e3


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
