"""The evaluation modes (test, benchmark, leaderboard, profile), run from the trusted parent.

The parent generates every input, keeps the original, and sends a clone to the worker; it computes the
reference on its original after the call and checks every output it is shown. The worker only calls
`custom_kernel` and measures time.
"""
from __future__ import annotations

import functools
import math
import random
import secrets
import time
from dataclasses import asdict, dataclass

import torch

from arena.clock import gpustate, masking, timing
from arena.audit import reply_audit
from arena.isolation import worker_text
from arena.taskdef.checking import ReferenceCheck
from arena.report.progress import Silent
from arena.taskdef.nested import tensors_in
from arena.report.results import CaseResult
from arena.clock.parent_clock import ClockFloor, SpinSizer, window_spin_us
from arena.worker.client import Reply, Window, Worker, WorkerFailure
from arena.taskdef.specs import Case

WALL_CALLS = 5            # sync-to-sync calls per case, to compare with event time (side-stream check)


AUTO_FLOOR_S = 30.0       # the least a request gets under the default timeout
# and per MiB of one call's inputs, per call, before any call answered. "emulated": --emulate-blackwell, where
# the tcgen05 work runs in software (9 s for 2304x4608x7168's 50 MiB alone on an H200, ten times that with
# 15 evaluations sharing the GPU; a 32 s limit cut four public kernels that pass).
AUTO_S_PER_MIB = {"cpu": 2.0, "cuda": 0.05, "emulated": 10.0}
AUTO_SEEN_FACTOR = 20     # once a call of the case answered: this many times its time per call
BUILD_ALLOWANCE_S = 300.0   # a run's first request, where a submission that builds lazily compiles
EMULATED_BUILD_ALLOWANCE_S = 900.0     # the same under --emulate-blackwell: two ptxas passes and the rewrite,
                                       # often beside other builds (novus677's dual GEMM passed 300 s with 58)


def auto_timeout(device: str, input_bytes: int, calls: int, seen_per_call_s: float | None,
                 builds: bool = False) -> float:
    """The default limit for one request to the worker, fitted to the case: a floor, plus (before a call of
    the case answered) an allowance per MiB of its inputs on this device, or (after) AUTO_SEEN_FACTOR times
    the slowest time per call seen in the case; plus a build's allowance where one may happen."""
    if seen_per_call_s is not None:
        fitted = AUTO_SEEN_FACTOR * seen_per_call_s * calls
    else:
        fitted = AUTO_S_PER_MIB.get(device, AUTO_S_PER_MIB["cpu"]) * input_bytes / 2**20 * calls
    allowance = EMULATED_BUILD_ALLOWANCE_S if device == "emulated" else BUILD_ALLOWANCE_S
    return round(AUTO_FLOOR_S + fitted + (allowance if builds else 0.0), 1)


@dataclass
class Limits:
    case_timeout: float | None = None   # s per request to the worker; None: auto_timeout fits each request
    max_runs: int = 200             # timed calls per benchmark case
    max_wall: float = 10.0          # s of timing per benchmark case
    check_every: bool = False       # check every timed output (leaderboard), not one per batch
    method: str = "competition"     # "competition": calls_per_sample inputs back to back per sample; "per-call"
    calls_per_sample: int = 1       # the competition's number for the task (task.yml competition_timing)
    wall_calls: int = WALL_CALLS    # sync-to-sync calls per case (--max-runs caps them too)
    diagnose_all: bool = False      # every failing case diagnosed in full (else one per pattern of wrong elements)
    strict: bool = False            # refuse an output dtype or strided layout that the competition accepts
    emulated: bool = False          # --emulate-blackwell: tcgen05 work runs in software, under its own timeouts


def data_bytes(data) -> int:
    return sum(t.untyped_storage().nbytes() for _, t in tensors_in(data))


# Said with an untouched output on a GPU: the worker's launch check found no CUDA error pending after the call
# (a launch that failed, e.g. no kernel image for this GPU, is named as such before this point).
UNCHANGED = "custom_kernel returned the input c unchanged"
UNTOUCHED_CAUSES = ("; the kernel never ran, or wrote elsewhere, although CUDA reported no launch error: an empty "
                    "grid, an early return, or the result written to another tensor")


def _error_figures(reference, output, expected, regenerate) -> list:
    """The heatmaps of a wrong output (arena/report/figures.py), with the pristine pre-filled c when it can be remade."""
    from arena.report import figures
    from arena.diagnose.explain import prefilled_of, tolerance_of
    from arena.diagnose.groups import group_label, is_group_contract
    fresh = regenerate() if regenerate is not None else None
    prefilled = prefilled_of(fresh) if fresh is not None else None
    labels = [group_label(fresh, i) for i in range(len(fresh[0]))] if is_group_contract(fresh) else None
    return figures.error_figures(output, expected, prefilled, *tolerance_of(reference), labels)


def _some_groups_unchanged(problem: str, output) -> bool:
    """A group GEMM with whole groups left unwritten: the diagnosis says which groups and why (one output
    tensor left unchanged needs no more words than the error)."""
    return problem.startswith(UNCHANGED) and isinstance(output, (list, tuple))


class Evaluator:
    """Runs cases of one task against one submission, replacing the worker whenever it breaks."""

    def __init__(self, reference, worker: Worker, device: str, limits: Limits, progress=None, figures: bool = False,
                 clean: Worker | None = None):
        self.reference = reference
        self.progress = progress or Silent()
        self.figures = figures                    # keep pictures of wrong outputs and the timed samples
        self._expected = None                     # the reference's output at the last check
        self.patterns: dict = {}                  # pattern of wrong elements -> the case diagnosed in full for it
        self.worker = worker
        self.clean = clean                        # imports arena/clock/clean_submission.py: the clock baseline
        self.device = device
        self.limits = limits
        self.audit = reply_audit.OutputAudit()      # aliasing, untouched c, late writes (arena/audit/reply_audit.py)
        self._clean_staged = False
        self.spin_sizer = SpinSizer()             # the GPU's work ahead of each window (arena/clock/parent_clock.py)
        self._probes = CaseResult(index=-1, spec="probe", passed=False)     # collects what probed calls print
        self.threads_seen = 0
        self.gpu = gpustate.GpuMonitor.open(torch.cuda.current_device()) if device == "cuda" else None
        self.builds = False                       # the submission may compile on its first call (auto timeout)
        self.builds_per_shape = False             # ... and again on each case's first call (CuTe DSL, Triton)
        self._answered = False                    # a request of the run has been answered
        self._seen_per_call = None                # the slowest time per call in this case so far (s)
        self._hung = False                        # a request timed out since take_hang() last looked

    def take_hang(self) -> bool:
        """Whether a request timed out since the last look (the evaluation stops running cases after one)."""
        hung, self._hung = self._hung, False
        return hung

    def new_case(self):
        self._seen_per_call = None
        self._clean_staged = False                # the clean worker stages this case's layout once

    def timeout(self, inputs: list, calls: int | None = None) -> float:
        """Seconds one request may take: --timeout, else fitted to the case (auto_timeout)."""
        if self.limits.case_timeout is not None:
            return self.limits.case_timeout
        calls = calls if calls is not None else max(1, len(inputs))
        size = data_bytes(inputs[:1]) if inputs else 0
        building = self.builds and (not self._answered or (self.builds_per_shape and self._seen_per_call is None))
        device = "emulated" if self.limits.emulated else self.device
        return auto_timeout(device, size, calls, self._seen_per_call, building)

    def _audit(self, labels: list, sent: list, originals: list, outputs: list, result) -> tuple[list, str]:
        """Snapshots of the outputs as they arrived (what gets checked) and the first integrity error."""
        snaps, errors = self.audit.arrived(labels, sent, outputs, result)
        problem = next((e for e in errors if e), "")
        for label, data, snap in zip(labels, originals, snaps):
            path = None if problem else reply_audit.unchanged_input(data, snap)
            if path:
                where = "" if len(labels) == 1 else f", {label}"
                problem = f"{UNCHANGED} ({path} still holds its pre-filled " \
                          f"values{where}){UNTOUCHED_CAUSES if self.device == 'cuda' else ''}"
        return snaps, problem

    def call_once(self, data):
        """The submission's output for one untimed call on a copy of `data` (diagnose's probes use it); what it
        printed is kept for `take_probe_output`."""
        return self._call("run", [data], self._probes).outputs[0]

    def take_probe_output(self) -> str:
        text, self._probes.output = self._probes.output, ""
        return text

    def _run_once(self, data, label: str, result) -> tuple:
        """One untimed call on a copy of `data`: (the output as it arrived, the first integrity error)."""
        reply = self._call("run", [data], result)
        (output,), problem = self._audit([label], reply.sent, [data], reply.outputs, result)
        return output, problem

    def _late_writes(self, result=None) -> bool:
        """Fail every case with an output that changed after it arrived; True if `result` is one."""
        hit = False
        for label, owner in self.audit.late_writes():
            owner.passed, owner.error, owner.details = False, f"the output of {label} {reply_audit.LATE_WRITE}", []
            hit = hit or owner is result
        return hit

    def _note_threads(self, fields: dict, result):
        threads = int(fields.get("threads", 0))
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

    def _call(self, op: str, inputs: list, result, **args) -> Reply:
        """One request to the worker; what it printed and its thread count go to `result`."""
        return self._exchange(lambda: self.worker.request(op, inputs, self.timeout(inputs), **args), inputs, result)

    def _exchange(self, ask, inputs: list, result):
        """`ask()` the worker (a Reply or a Window comes back): a failure that broke the worker stops it; an
        answer sets the case's time per call (the default timeout) and gives its threads and text to `result`."""
        try:
            answer = ask()
        except WorkerFailure as failure:
            self._hung = self._hung or failure.hang
            if failure.replace:
                self.worker.stop()
            raise
        self._answered = True
        per_call = answer.elapsed_ns / 1e9 / max(1, len(inputs))
        self._seen_per_call = max(per_call, self._seen_per_call or 0.0)
        self._note_threads(answer.fields, result)
        if answer.output_text:
            result.output = (result.output + "\n" + answer.output_text).strip()[-worker_text.OUTPUT_CAP:]
        return answer

    def _check(self, data, output, result) -> tuple[bool, str, list]:
        """(passed, one-line error, detail lines); what the competition accepts but is worth a word goes to
        `result.warnings`. The reference runs here, on the parent's original."""
        self._sync()
        self._expected = None                   # a task's own check leaves none: never an earlier case's
        check = self.reference.check_implementation
        if not isinstance(check, ReferenceCheck):       # a task's own check: its message, as one line
            good, message = check(data, output)
            return good, " ".join(str(message).split()), []
        checked = check.compare(data, output, strict=self.limits.strict)
        self._expected = checked.expected       # for the pictures and the quick look (held until the next check)
        result.warnings.extend(line for line in checked.warnings if line not in result.warnings)
        if checked.passed or checked.problem:
            return checked.passed, checked.problem, []
        where = f"group {checked.group}: " if checked.group is not None else ""
        return False, f"wrong result: {where}{checked.mismatches[0]}", checked.mismatches[1:]

    def _diagnose(self, result: CaseResult, data, output, regenerate=None):
        """Attach a plain-words diagnosis of a wrong output (human and JSON reports only, never POPCORN), and
        with --report/--plots its pictures. A case whose wrong elements fall in the pattern of a case already
        diagnosed is said to fail like it (a full diagnosis costs seconds to tens of seconds on a CPU, and the
        same kernel fails the same way on every shape); --diagnose-all diagnoses each in full."""
        from arena.diagnose import explain_failure, failure_pattern
        from arena.taskdef.nested import map_leaves
        output = map_leaves(output, lambda x: x.contiguous() if isinstance(x, torch.Tensor) else x)   # strided results too
        pattern = None if self.limits.diagnose_all else failure_pattern(output, self._expected, self.reference)
        if pattern is not None and pattern.key in self.patterns:
            first = self.patterns[pattern.key]
            result.diagnosis = (f"Fails like case {first.index} ({pattern.words}): see its diagnosis. Not "
                                f"diagnosed again (--diagnose-all diagnoses every failing case).")
            result.evidence = pattern.lines
            return
        self.progress.stage("diagnosing the wrong output")
        regenerate = functools.cache(regenerate) if regenerate is not None else None   # made once for both
        found = explain_failure(self.reference, data, output, regenerate, rerun=self.call_once)
        if found is not None:
            result.diagnosis, result.evidence = found.summary, found.evidence
        if pattern is not None:
            self.patterns[pattern.key] = result
        if self.figures and self._expected is not None:
            try:
                result.figures = _error_figures(self.reference, output, self._expected, regenerate)
            except Exception as error:      # pictures must never cost the user their results
                result.warnings.append(f"no error pictures: {type(error).__name__}: {error}")

    def generate(self, args: dict, seed_offset: int = 0):
        args = dict(args)
        if "seed" in args:
            args["seed"] += seed_offset
        return self.reference.generate_input(**args)

    def generate_fresh(self, args: dict):
        """A timed input: the case's shape with a fresh seed of 64 bits from the OS's CSPRNG, so nothing the
        worker has seen (the case's public seed, earlier inputs) predicts it."""
        return self.generate({**args, "seed": fresh_seed()} if "seed" in args else args)

    def test(self, index: int, case: Case) -> CaseResult:
        self.new_case()
        result = CaseResult(index=index, spec=case.spec, passed=False)
        try:
            data = self.generate(case.args)
            self.progress.stage("running custom_kernel")
            output, problem = self._run_once(data, "the call", result)
            if problem:
                result.error = problem
            else:
                self.progress.stage("checking against the reference")
                result.passed, result.error, result.details = self._check(data, output, result)
            if result.passed:
                result.message, result.error = result.error, ""
            elif not problem or _some_groups_unchanged(problem, output):
                self._diagnose(result, data, output, lambda: self.generate(case.args))
            self._late_writes(result)
        except WorkerFailure as failure:
            result.error = str(failure)
            result.details = [failure.traceback] if failure.traceback else []
        except Exception as error:      # the task's own generator or reference failed: say so plainly
            result.error = f"evaluator error: {type(error).__name__}: {error}"
        return result

    def benchmark(self, index: int, case: Case, sol_us: float | None) -> CaseResult:
        self.new_case()
        result = CaseResult(index=index, spec=case.spec, passed=False, sol_us=sol_us)
        limits = self.limits
        try:
            # Warm-up and the obligatory correctness check, on the case's own seed.
            data = self.generate(case.args)
            self.progress.stage("running the correctness call")
            output, problem = self._run_once(data, "the correctness call", result)
            if not problem:
                self.progress.stage("checking against the reference")
            good, error, details = (False, problem, []) if problem else self._check(data, output, result)
            if not good and problem:
                result.error = f"failed the correctness check before timing: {error}"
                if _some_groups_unchanged(problem, output):
                    self._diagnose(result, data, output, lambda: self.generate(case.args))
                return result
            if not good:
                result.error, result.details = f"failed the correctness check before timing: {error}", details
                self._diagnose(result, data, output, lambda: self.generate(case.args))
                return result
            del data, output
            batch = _batch_size(self.generate(case.args), self.device)
            together = limits.method == "competition" and limits.calls_per_sample > 1
            result.timing = {"method": limits.method,
                             "calls_per_sample": limits.calls_per_sample if together else 1}
            samples, clean_samples, started, windows = [], [], time.perf_counter(), 0
            floor = ClockFloor(self.device)
            # Where the case's wall time went (s): generating inputs, the timed windows of both workers on the
            # parent's clock, staging and collecting (shared memory), checking.
            spent = {"generate": 0.0, "worker": 0.0, "staging": 0.0, "check": 0.0}
            phases, window_log = [], []
            readings = [self.gpu.read()] if self.gpu else []
            self.progress.timing(0, None, None)
            # One uncounted window first, the warm-up: the host time it reports sizes the GPU's work ahead of
            # every counted window of the case, once (a size that moved from window to window would move the
            # clean windows too, and their spread is the parent's measure of its own noise).
            host_ns, host_calls, warm, spin = None, 1, True, 0
            # A CPU call that takes a good part of the case's budget: the correctness call was its warm-up, and
            # the sync-to-sync calls are as few as the budget holds (a gemv call of seconds times 1, not 5).
            slow = self._seen_per_call is not None and self._seen_per_call > limits.max_wall / 4
            warm = not (slow and self.device == "cpu")
            wall_calls = limits.wall_calls if not slow else \
                max(1, min(limits.wall_calls, int(limits.max_wall / self._seen_per_call)))
            if slow and self.device == "cpu":
                wall_calls = 0      # sync-to-sync calls compare with a GPU's event time: on a CPU, one more slow call
            self._clean_worker()                  # started before the clock of the case's budget runs
            while warm or not samples or not timing.should_stop(samples, time.perf_counter() - started,
                                                                limits.max_runs, limits.max_wall):
                # Competition: one window is one sample of N distinct inputs, each fresh (a cached result
                # cannot be replayed); per-call: one window holds several one-call samples.
                size = limits.calls_per_sample if together else min(batch, limits.max_runs - len(samples))
                size = 1 if warm and not together else size
                if not together and not warm and self._seen_per_call:     # a window's calls fit what is left
                    left = limits.max_wall - (time.perf_counter() - started)
                    size = max(1, min(size, int(left / self._seen_per_call)))
                mark = time.perf_counter()
                originals = [self.generate_fresh(case.args) for _ in range(size)]
                labels = [f"timed call {windows * size + i}" for i in range(size)] if not warm else \
                    [f"warm-up call {i}" for i in range(size)]
                spent["generate"] += time.perf_counter() - mark
                if self.device == "cuda" and (warm or windows == 0):
                    spin = self.spin_sizer.size(window_spin_us(host_ns, host_calls, size, together))
                window = self._window(originals, result, together, spin)
                clean = self._clean_window(originals, together, spin, window.outputs)
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
                verified = self._verify(labels, window, originals, result, first=warm or windows == 0)
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
                if not self.progress.quiet:
                    running = timing.summarize(samples)
                    self.progress.timing(len(samples), running.mean, running.err)
                if self.gpu:
                    readings.append(self.gpu.read())
            # Untimed: sync-to-sync calls (the drain), in a request of its own.
            wall_fields = {}
            if wall_calls:
                wall_originals = [self.generate_fresh(case.args) for _ in range(wall_calls)]
                wall = self._call("wall", wall_originals, result)
                if not self._verify([f"wall-clock call {i}" for i in range(wall_calls)], wall, wall_originals,
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
            result.samples_ns = list(samples) if self.figures else []
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

    def _clean_worker(self) -> Worker:
        if self.clean is None:
            raise WorkerFailure("no clean worker to time empty windows in")
        if self.clean.process is None:
            self.clean.start()
        return self.clean

    def _window(self, originals: list, result, together: bool, spin: int) -> Window:
        """One timed window of the submission (arena/worker/client.py Worker.time_window)."""
        return self._exchange(lambda: self.worker.time_window(originals, self.timeout(originals), together=together,
                                                              spin=spin), originals, result)

    def _clean_window(self, originals: list, together: bool, spin: int, outputs: list) -> Window:
        """The same window in the clean worker around an empty call, digesting as many bytes as the
        submission's outputs, laid out as they are: the parent's clock baseline (arena/clock/parent_clock.py). Its
        inputs are staged once per case (it computes nothing from them)."""
        clean = self._clean_worker()
        layouts = [masking.layout_of(t) for o in outputs for _, t in tensors_in(o)]
        restage = not self._clean_staged or clean.staged is None or len(clean.staged) != len(originals)
        self._clean_staged = True
        return clean.time_window(originals, self.timeout(originals), together=together, spin=spin,
                                 empty=True, digest_like=layouts, restage=restage)

    def _verify(self, labels: list, reply: Reply | Window, originals: list, result, first: bool = True) -> bool:
        """Audit every output of one request and check them: every one in a ranked run, else one the
        submission cannot predict (and, in a case's `first` request, its first output too); False with
        `result.error` set at the first problem. Auditing and checking took 116 ms of the 270 ms a 50-call sample
        cost at 128x7168x16384 on an H100, when two outputs were checked per request."""
        outputs, problem = self._audit(labels, reply.sent, originals, reply.outputs, result)
        if problem or self._late_writes(result):
            result.error = result.error or problem
            return False
        to_check = list(zip(labels, originals, outputs))
        if not self.limits.check_every:
            head = to_check[:1] if first or len(to_check) == 1 else []
            rest = to_check[1:] if head else to_check
            to_check = head + _RANDOM.sample(rest, min(1, len(rest)))
        for label, data, output in to_check:
            good, error, details = self._check(data, output, result)
            if not good:
                result.error = f"a timed output is wrong: {error} ({label})"
                result.details = details
                self._diagnose(result, data, output)
                return False
        return not self._late_writes(result)

    def profile(self, index: int, case: Case) -> tuple[CaseResult, str]:
        self.new_case()
        result = CaseResult(index=index, spec=case.spec, passed=False)
        try:
            data = self.generate(case.args)
            self.progress.stage("one call under the PyTorch profiler")
            reply = self._call("profile", [data], result)
            result.passed = True
            return result, reply.fields.get("table", "")
        except WorkerFailure as failure:
            result.error = str(failure)
            return result, ""


def _batch_size(sample, device: str) -> int:
    """Distinct inputs per timed batch: as many as fit in a modest memory budget, 1 to 20."""
    budget = (1 << 30) if device == "cuda" else (64 << 20)
    return max(1, min(20, budget // max(1, data_bytes(sample))))


_RANDOM = random.SystemRandom()


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


def fresh_seed() -> int:
    """64 bits from the OS's CSPRNG, kept clear of the top of torch's seed range so a task may add to it."""
    return secrets.randbelow(2**64 - 2**32)


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
