"""The per-case evaluator of every mode (test, benchmark, leaderboard, profile), run from the trusted parent
(arena/run/evaluation.py).

The parent generates every input, keeps the original, and sends a clone to the worker; it computes the
reference on its original after the call and checks every output it is shown. The worker only calls
`custom_kernel` and measures time. A benchmark case's timed windows are arena/run/benchmark.py, which uses this
evaluator's calls and checks; the limits of each request are arena/run/limits.py.
"""
from __future__ import annotations

import functools
import random
import secrets
import time

import torch

from arena.audit import reply_audit
from arena.clock import gpustate
from arena.clock.parent_clock import SpinSizer
from arena.isolation import worker_text
from arena.report.progress import Silent
from arena.report.results import CaseResult
from arena.run.limits import Limits, auto_timeout, data_bytes
from arena.taskdef.checking import ReferenceCheck
from arena.taskdef.specs import Case
from arena.worker.client import Reply, Window, Worker, WorkerFailure


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
        self.work_counts = None                   # --emulate-blackwell: what the last untimed call issued (worker's)

    @staticmethod
    def some_groups_unchanged(problem: str, output) -> bool:
        """A group GEMM with whole groups left unwritten: the diagnosis says which groups and why (one output
        tensor left unchanged needs no more words than the error)."""
        return problem.startswith(UNCHANGED) and isinstance(output, (list, tuple))

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
        # Under --emulate-blackwell the first request gets the build allowance whatever the source shows: with a
        # batch of 40 sharing four GPUs, a first call of torch._scaled_mm (emulated) passed 30 s on three files.
        builds = self.builds or self.limits.emulated
        building = builds and (not self._answered or (self.builds_per_shape and self._seen_per_call is None))
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
        counts = reply.fields.get("work_counts")
        self.work_counts = counts[0] if isinstance(counts, list) and len(counts) == 1 else None
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
            elif not problem or self.some_groups_unchanged(problem, output):
                self._diagnose(result, data, output, lambda: self.generate(case.args))
            self._late_writes(result)
        except WorkerFailure as failure:
            result.error = str(failure)
            result.details = [failure.traceback] if failure.traceback else []
        except Exception as error:      # the task's own generator or reference failed: say so plainly
            result.error = f"evaluator error: {type(error).__name__}: {error}"
        return result

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


_RANDOM = random.SystemRandom()


def fresh_seed() -> int:
    """64 bits from the OS's CSPRNG, kept clear of the top of torch's seed range so a task may add to it."""
    return secrets.randbelow(2**64 - 2**32)
