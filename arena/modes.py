"""The evaluation modes (test, benchmark, leaderboard, profile), run from the trusted parent.

The parent generates every input, keeps the original, and sends a clone to the worker; it computes the
reference on its original after the call and checks every output it is shown. The worker only calls
`custom_kernel` and measures time.
"""
from __future__ import annotations

import math
import random
import secrets
import time
from dataclasses import dataclass, field

import torch

from arena import integrity, timing
from arena.nested import map_leaves
from arena.runner import Worker, WorkerFailure
from arena.specs import Case

SEED_STRIDE = 42          # per-call seeds: case seed + 42*i, as the competition's batched evaluator
WALL_CALLS = 5            # sync-to-sync calls per case, to compare with event time (side-stream check)


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
    diagnosis: str = ""                              # why the output is wrong, in plain words (arena/diagnose.py)
    evidence: list = field(default_factory=list)     # the lines backing the diagnosis

    def as_dict(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if k not in ("stats", "wall")}
        d["stats"] = self.stats.as_dict() if self.stats else None
        d["wall"] = self.wall.as_dict() if self.wall else None
        return d


def clone_data(data):
    """Deep copy of the tensors in nested tuples/lists/dicts (what the submission gets)."""
    return map_leaves(data, lambda x: x.clone() if isinstance(x, torch.Tensor) else x)


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
        self.audit = integrity.OutputAudit()      # aliasing, untouched c, late writes (arena/integrity.py)
        self.salt = secrets.randbelow(2**30) + 1   # timed inputs: unpredictable seeds, new on every run
        self.threads_seen = 0

    def _audit(self, labels: list, sent: list, originals: list, outputs: list, result) -> tuple[list, str]:
        """Snapshots of the outputs as they arrived (what gets checked) and the first integrity error."""
        snaps, errors = self.audit.arrived(labels, sent, outputs, result)
        problem = next((e for e in errors if e), "")
        for label, data, snap in zip(labels, originals, snaps):
            path = None if problem else integrity.unchanged_input(data, snap)
            if path:
                where = "" if len(labels) == 1 else f", {label}"
                problem = f"custom_kernel returned the input c unchanged ({path} still holds its pre-filled " \
                          f"values{where})"
        return snaps, problem

    def _run_once(self, data, label: str, result) -> tuple:
        """One untimed call on a copy of `data`: (the output as it arrived, the first integrity error)."""
        sent = [clone_data(data)]
        reply = self._call("run", inputs=sent)
        self._note_threads(reply, result)
        (output,), problem = self._audit([label], sent, [data], reply["outputs"], result)
        return output, problem

    def _late_writes(self, result=None) -> bool:
        """Fail every case with an output that changed after it arrived; True if `result` is one."""
        hit = False
        for label, owner in self.audit.late_writes():
            owner.passed, owner.error, owner.details = False, f"the output of {label} {integrity.LATE_WRITE}", []
            hit = hit or owner is result
        return hit

    def _note_threads(self, reply: dict, result):
        threads = reply.get("threads", 0)
        self.threads_seen = max(self.threads_seen, threads)
        if threads > 0:
            note = f"the submission left {threads} Python thread(s) running after custom_kernel returned"
            if note not in result.warnings:
                result.warnings.append(note)

    def finish(self):
        """A last look for late writes, before the worker is stopped."""
        if self.threads_seen:
            time.sleep(0.3)                  # give a background writer the time it asked for
        self._late_writes()

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

    def _diagnose(self, result: CaseResult, data, output, regenerate=None):
        """Attach a plain-words diagnosis of a wrong output (human and JSON reports only, never POPCORN)."""
        from arena.diagnose import explain_failure
        found = explain_failure(self.reference, data, output, regenerate)
        if found is not None:
            result.diagnosis, result.evidence = found.summary, found.evidence

    def generate(self, args: dict, seed_offset: int = 0):
        args = dict(args)
        if "seed" in args:
            args["seed"] += seed_offset
        return self.reference.generate_input(**args)

    def test(self, index: int, case: Case) -> CaseResult:
        result = CaseResult(index=index, spec=case.spec, passed=False)
        try:
            data = self.generate(case.args)
            output, problem = self._run_once(data, "the call", result)
            if problem:
                result.error = problem
            else:
                result.passed, result.error, result.details = self._check(data, output)
            if result.passed:
                result.message, result.error = result.error, ""
            elif not problem:
                self._diagnose(result, data, output, lambda: self.generate(case.args))
            self._late_writes(result)
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
            output, problem = self._run_once(data, "the correctness call", result)
            good, error, details = (False, problem, []) if problem else self._check(data, output)
            if not good and problem:
                result.error = f"failed the correctness check before timing: {error}"
                return result
            if not good:
                result.error, result.details = f"failed the correctness check before timing: {error}", details
                self._diagnose(result, data, output, lambda: self.generate(case.args))
                return result
            del data, output
            batch = _batch_size(self.generate(case.args), self.device)
            samples, wall_samples, calls, started = [], [], 0, time.perf_counter()
            extras = {"drain_ns": [], "sync_ns": None, "empty_ns": None}
            while not timing.should_stop(samples, time.perf_counter() - started, limits.max_runs, limits.max_wall):
                size = min(batch, limits.max_runs - len(samples))
                offset = self.salt + SEED_STRIDE * calls
                originals = [self.generate(case.args, offset + SEED_STRIDE * (i + 1)) for i in range(size)]
                wall_originals = [] if wall_samples else \
                    [self.generate(case.args, self.salt + SEED_STRIDE * (10**6 + i)) for i in range(WALL_CALLS)]
                labels = [f"timed call {calls + i}" for i in range(size)] + \
                    [f"wall-clock call {i}" for i in range(len(wall_originals))]
                calls += size
                sent = [clone_data(d) for d in originals + wall_originals]
                reply = self._call("time", inputs=sent[:size], wall_inputs=sent[size:])
                samples += reply["times_ns"]
                wall_samples += reply["wall_ns"]
                extras["drain_ns"] += reply.get("drain_ns", [])
                extras["sync_ns"] = reply.get("sync_ns", extras["sync_ns"])
                extras["empty_ns"] = reply.get("empty_ns", extras["empty_ns"])
                self._note_threads(reply, result)
                outputs, problem = self._audit(labels, sent, originals + wall_originals, reply["outputs"], result)
                if problem or self._late_writes(result):
                    result.error = result.error or problem
                    return result
                to_check = list(zip(labels, originals + wall_originals, outputs))
                if not limits.check_every:     # the first, and one the submission cannot predict
                    to_check = to_check[:1] + _RANDOM.sample(to_check[1:], min(1, len(to_check) - 1))
                for label, data, output in to_check:
                    good, error, details = self._check(data, output)
                    if not good:
                        result.error = f"a timed output is wrong: {error} ({label})"
                        result.details = details
                        self._diagnose(result, data, output)
                        return result
                if self._late_writes(result):
                    return result
            result.stats = timing.summarize(samples)
            result.wall = timing.summarize(wall_samples) if wall_samples else None
            result.passed = True
            result.warnings = timing_warnings(result, {**extras, "samples": samples}) + result.warnings
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


_RANDOM = random.SystemRandom()


def timing_warnings(result: CaseResult, extras: dict | None = None) -> list[str]:
    """Flags for times that cannot be honest (arena/integrity.py timing_flags): faster than the B200 speed of
    light, the GPU still busy long after the call returned (work escaping the timed stream), or many calls
    no longer than an empty timed window (super-batch / replay)."""
    if not result.stats:
        return []
    extras = extras or {}
    samples = extras.get("samples") or [result.stats.median]
    wall = [result.wall.median] if result.wall else None
    return integrity.timing_flags(samples, result.sol_us, wall, extras.get("drain_ns"), extras.get("sync_ns"),
                                  extras.get("empty_ns"))


def geomean_us(results: list[CaseResult]) -> float | None:
    means = [r.stats.mean / 1e3 for r in results if r.passed and r.stats]
    if not means or len(means) != len(results):
        return None
    return math.exp(sum(math.log(m) for m in means) / len(means))
