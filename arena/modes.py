"""The evaluation modes (test, benchmark, leaderboard, profile), run from the trusted parent.

The parent generates every input, keeps the original, and sends a clone to the worker; it computes the
reference on its original after the call and checks every output it is shown. The worker only calls
`custom_kernel` and measures time.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import torch

from arena import checking, timing
from arena.runner import Worker, WorkerFailure
from arena.specs import Case

SEED_STRIDE = 42          # per-call seeds: case seed + 42*i, as the competition's batched evaluator
WALL_CALLS = 3            # sync-to-sync calls per case, to compare with event time (side-stream check)


@dataclass
class Limits:
    case_timeout: float = 180.0     # s per request to the worker (the first one may include a JIT build)
    max_runs: int = 200             # timed calls per benchmark case
    max_wall: float = 10.0          # s of timing per benchmark case
    check_every: bool = False       # check every timed output (leaderboard), not one per batch


@dataclass
class CaseResult:
    index: int
    spec: str
    passed: bool
    error: str = ""                 # one line: why it failed
    message: str = ""
    details: list = field(default_factory=list)      # mismatch lines, traceback tail
    stats: timing.Stats | None = None
    wall: timing.Stats | None = None                 # sync-to-sync wall-clock per call
    sol_us: float | None = None
    warnings: list = field(default_factory=list)     # integrity flags

    def as_dict(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if k not in ("stats", "wall")}
        d["stats"] = self.stats.as_dict() if self.stats else None
        d["wall"] = self.wall.as_dict() if self.wall else None
        return d


def clone_data(data):
    """Deep copy of the tensors in nested tuples/lists/dicts (what the submission gets)."""
    if isinstance(data, tuple):
        return tuple(clone_data(x) for x in data)
    if isinstance(data, list):
        return [clone_data(x) for x in data]
    if isinstance(data, dict):
        return {k: clone_data(v) for k, v in data.items()}
    if isinstance(data, torch.Tensor):
        return data.clone()
    return data


def data_bytes(data) -> int:
    if isinstance(data, (tuple, list)):
        return sum(data_bytes(x) for x in data)
    if isinstance(data, dict):
        return sum(data_bytes(x) for x in data.values())
    if isinstance(data, torch.Tensor):
        return data.untyped_storage().nbytes()
    return 0


class Evaluator:
    """Runs cases of one task against one submission, replacing the worker whenever it breaks."""

    def __init__(self, reference, worker: Worker, device: str, limits: Limits):
        self.reference = reference
        self.worker = worker
        self.device = device
        self.limits = limits

    def _sync(self):
        if self.device == "cuda":
            torch.cuda.synchronize()

    def _call(self, op: str, **args) -> dict:
        try:
            return self.worker.request(op, self.limits.case_timeout, **args)
        except WorkerFailure as failure:
            if failure.replace:
                self.worker.stop()
            raise

    def _check(self, data, output) -> tuple[bool, str, list]:
        """(passed, one-line error, detail lines). The reference runs here, on the parent's original."""
        self._sync()
        good, message = self.reference.check_implementation(data, output)
        if good:
            return True, message, []
        _, found, mismatches = message.partition("doesn't match reference: ")
        if not found:
            return False, message, []
        details = mismatches.replace(" ERROR AT", "\nERROR AT").replace(" ... and", "\n... and").splitlines()
        return False, f"wrong result: {details[0]}", details[1:]

    def generate(self, args: dict, seed_offset: int = 0):
        args = dict(args)
        if "seed" in args:
            args["seed"] += seed_offset
        return self.reference.generate_input(**args)

    def test(self, index: int, case: Case) -> CaseResult:
        result = CaseResult(index=index, spec=case.spec, passed=False)
        try:
            data = self.generate(case.args)
            output = self._call("run", inputs=[clone_data(data)])["outputs"][0]
            result.passed, result.error, result.details = self._check(data, output)
            if result.passed:
                result.message, result.error = result.error, ""
        except WorkerFailure as failure:
            result.error = str(failure)
            result.details = [failure.traceback] if failure.traceback else []
        except Exception as error:      # the task's own generator or reference failed: say so plainly
            result.error = f"evaluator error: {type(error).__name__}: {error}"
        return result

    def benchmark(self, index: int, case: Case, sol_us: float | None) -> CaseResult:
        result = CaseResult(index=index, spec=case.spec, passed=False, sol_us=sol_us)
        limits = self.limits
        try:
            # Warm-up and the obligatory correctness check, on the case's own seed.
            data = self.generate(case.args)
            output = self._call("run", inputs=[clone_data(data)])["outputs"][0]
            good, error, details = self._check(data, output)
            if not good:
                result.error, result.details = f"failed the correctness check before timing: {error}", details
                return result
            del data, output
            batch = _batch_size(self.generate(case.args), self.device)
            samples, wall_samples, calls, started = [], [], 0, time.perf_counter()
            while not timing.should_stop(samples, time.perf_counter() - started, limits.max_runs, limits.max_wall):
                size = min(batch, limits.max_runs - len(samples))
                originals = [self.generate(case.args, SEED_STRIDE * (calls + i + 1)) for i in range(size)]
                wall_originals = [] if wall_samples else \
                    [self.generate(case.args, SEED_STRIDE * (10**6 + i)) for i in range(WALL_CALLS)]
                calls += size
                reply = self._call("time", inputs=[clone_data(d) for d in originals],
                                   wall_inputs=[clone_data(d) for d in wall_originals])
                samples += reply["times_ns"]
                wall_samples += reply["wall_ns"]
                to_check = list(zip(originals + wall_originals, reply["outputs"]))
                if not limits.check_every:
                    to_check = to_check[:1]
                for data, output in to_check:
                    good, error, details = self._check(data, output)
                    if not good:
                        result.error = f"a timed output is wrong: {error}"
                        result.details = details
                        return result
            result.stats = timing.summarize(samples)
            result.wall = timing.summarize(wall_samples) if wall_samples else None
            result.passed = True
            result.warnings = timing_warnings(result)
        except WorkerFailure as failure:
            result.error = str(failure)
            result.details = [failure.traceback] if failure.traceback else []
        except Exception as error:
            result.error = f"evaluator error: {type(error).__name__}: {error}"
        return result

    def profile(self, index: int, case: Case) -> tuple[CaseResult, str]:
        result = CaseResult(index=index, spec=case.spec, passed=False)
        try:
            reply = self._call("profile", data=clone_data(self.generate(case.args)))
            result.passed = True
            return result, reply["table"]
        except WorkerFailure as failure:
            result.error = str(failure)
            return result, ""


def _batch_size(sample, device: str) -> int:
    """Distinct inputs per timed batch: as many as fit in a modest memory budget, 1 to 20."""
    budget = (1 << 30) if device == "cuda" else (64 << 20)
    return max(1, min(20, budget // max(1, data_bytes(sample))))


def timing_warnings(result: CaseResult) -> list[str]:
    """Flags for times that cannot be honest: faster than the B200 speed of light, or event time far
    below the synchronized wall-clock time (work escaping the timed stream)."""
    warnings = []
    if result.stats and result.sol_us and result.stats.median < result.sol_us * 1e3:
        warnings.append(f"median {result.stats.median / 1e3:.3f} us is below the B200 speed of light "
                        f"{result.sol_us} us: the timing cannot be honest")
    if result.stats and result.wall and result.wall.median > 4 * result.stats.median + 200e3:
        warnings.append(f"event time {result.stats.median / 1e3:.1f} us vs synchronized wall-clock "
                        f"{result.wall.median / 1e3:.1f} us per call: work may escape the timed stream")
    return warnings


def geomean_us(results: list[CaseResult]) -> float | None:
    means = [r.stats.mean / 1e3 for r in results if r.passed and r.stats]
    if not means or len(means) != len(results):
        return None
    return math.exp(sum(math.log(m) for m in means) / len(means))
