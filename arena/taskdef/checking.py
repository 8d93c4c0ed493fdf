"""Comparing a submission's output with the reference: the competition's semantics plus contract checks."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch


def as_3d(t: torch.Tensor) -> torch.Tensor:
    """Any output viewed as [rows, cols, batches], for maps, stripes and pictures of wrong elements."""
    if t.dim() == 3:
        return t
    if t.dim() == 2:
        return t.unsqueeze(-1)
    if t.dim() == 1:
        return t.reshape(-1, 1, 1)
    return t.reshape(t.shape[0], t.shape[1], -1)


@torch.no_grad()
def mismatch_mask(received: torch.Tensor, expected: torch.Tensor, rtol: float, atol: float) -> torch.Tensor:
    """Elements that fail |r - e| <= atol + rtol*|e|, or whose NaN / +Inf / -Inf status differs."""
    r, e = received.double(), expected.double()
    bad = (r - e).abs() > atol + rtol * e.abs()
    bad |= torch.isnan(r) ^ torch.isnan(e)
    bad |= torch.isposinf(r) ^ torch.isposinf(e)
    bad |= torch.isneginf(r) ^ torch.isneginf(e)
    # NaN compares false in `>` above, so a NaN on both sides passes, as in the competition.
    return bad


def _describe(mask: torch.Tensor, received, expected, max_print: int) -> list[str]:
    count = int(mask.count_nonzero())
    if count == 0:
        return []
    lines = [f"Number of mismatched elements: {count}"]
    for index in torch.nonzero(mask)[:max_print]:
        i = tuple(index.tolist())
        lines.append(f"ERROR AT {i}: {received[i]} {expected[i]}")
    if count > max_print:
        lines.append(f"... and {count - max_print} more mismatched elements.")
    return lines


@torch.no_grad()
def verbose_allclose(received, expected, rtol=1e-05, atol=1e-08, max_print=5) -> list[str]:
    """The competition's comparison: [] when close, else a count and the first mismatches."""
    if received.shape != expected.shape:
        return ["SIZE MISMATCH"]
    return _describe(mismatch_mask(received, expected, rtol, atol), received, expected, max_print)


@torch.no_grad()
def verbose_allequal(received, expected, max_print=5) -> list[str]:
    """Exact equality, reported like `verbose_allclose`."""
    if received.shape != expected.shape:
        return ["SIZE MISMATCH"]
    return _describe(torch.ne(received, expected), received, expected, max_print)


def contract_problem(output, expected: torch.Tensor, dtype: bool = True, layout: bool = True) -> str | None:
    """Why `output` breaks the task's output contract (type, shape, device; with `dtype`, also its dtype, with
    `layout` a strided layout), or None.

    The competition checks only values, so an fp32 result passed there: unless strict, a dtype or layout that
    differs is a warning (`layout_warnings`), and the values decide.
    """
    if not isinstance(output, torch.Tensor):
        return f"custom_kernel returned {type(output).__name__}, expected a torch.Tensor"
    if dtype and output.dtype != expected.dtype:
        return f"output dtype is {output.dtype}, expected {expected.dtype}"
    if tuple(output.shape) != tuple(expected.shape):
        return f"output shape is {list(output.shape)}, expected {list(expected.shape)}"
    if output.device != expected.device:
        return f"output is on {output.device}, expected {expected.device} (the inputs' device)"
    if layout and not _dense_like(output, expected):
        return f"output is {_strided(output)} (--strict asks for a dense tensor)"
    return None


def _dense_like(output: torch.Tensor, expected: torch.Tensor) -> bool:
    """Contiguous, or laid out as the reference's own output (the tasks' c may be a permuted view)."""
    return output.is_contiguous() or tuple(output.stride()) == tuple(expected.stride())


def _strided(output: torch.Tensor) -> str:
    return f"a strided view (stride {tuple(output.stride())} for shape {tuple(output.shape)})"


def layout_warnings(output, expected: torch.Tensor) -> list[str]:
    """What the competition accepts but a caller might not: a dtype other than the reference's, a strided view.
    One line each; the values are compared all the same."""
    if not isinstance(output, torch.Tensor) or tuple(output.shape) != tuple(expected.shape):
        return []
    found = []
    if output.dtype != expected.dtype:
        found.append(f"output dtype is {output.dtype}, expected {expected.dtype}: compared by value, as the "
                     f"competition does (--strict refuses it)")
    if not _dense_like(output, expected):
        found.append(f"output is {_strided(output)}: compared by value, as the competition does; code that "
                     f"reads it as a dense tensor would misread it (--strict refuses it)")
    return found


@torch.no_grad()
def dtype_only_note(output, expected: torch.Tensor, rtol: float, atol: float) -> str:
    """For an output whose only fault is its dtype: whether its values match anyway (the competition compares
    values only, so such an output passes there). "" for any other output."""
    if not isinstance(output, torch.Tensor) or output.dtype == expected.dtype or \
            tuple(output.shape) != tuple(expected.shape) or output.device != expected.device:
        return ""
    if verbose_allclose(output, expected, rtol=rtol, atol=atol):
        return " (its values do not match the reference either)"
    return " (its values match the reference: the competition, which compares values only, would pass it)"


def group_contract_problem(output, expected: list, strict: bool = True) -> str | None:
    """Why a per-group output (a list of tensors) breaks the contract: its type, its length (the competition
    added that check after `return []` passed), or any group's dtype, shape or device. None if fine."""
    if not isinstance(output, (list, tuple)):
        return f"custom_kernel returned {type(output).__name__}, expected a list of {len(expected)} tensors (one per group)"
    if len(output) != len(expected):
        return f"custom_kernel returned {len(output)} tensors, expected {len(expected)} (one per group)"
    for i, (out, want) in enumerate(zip(output, expected)):
        problem = contract_problem(out, want, strict, strict)
        if problem:
            return f"group {i}: {problem}"
    return None


@dataclass
class CheckResult:
    """One comparison with the reference: passed, or why not (a broken contract, or mismatching values)."""
    passed: bool
    problem: str = ""                   # the output breaks the contract: type, dtype, shape, device, group count
    mismatches: list[str] = field(default_factory=list)    # "Number of mismatched elements: N", "ERROR AT ..."
    group: int | None = None            # the group that mismatched (group GEMM)
    expected: object = field(default=None, repr=False, compare=False)   # the reference's output (the report's pictures)
    warnings: list[str] = field(default_factory=list)      # accepted, as the competition does, but worth a word

    def competition_message(self) -> str:
        """The competition's one message for this result ("" when it passed)."""
        if self.passed or self.problem:
            return self.problem
        where = f"group {self.group}: " if self.group is not None else ""
        return "mismatch found! custom implementation doesn't match reference: " + where + " ".join(self.mismatches)


def compare(data, output, reference, rtol: float, atol: float, strict: bool = False) -> CheckResult:
    """Compute the reference on `data` and compare. A reference that returns a list (group GEMM) is compared
    group by group. Unless `strict`, a dtype or strided layout unlike the reference's is a warning and the values
    decide, as in the competition."""
    expected = reference(data)
    if isinstance(expected, (list, tuple)):
        problem = group_contract_problem(output, expected, strict)
        if problem:
            if isinstance(output, (list, tuple)) and len(output) == len(expected):
                problem += next((note for out, want in zip(output, expected)
                                 if (note := dtype_only_note(out, want, rtol, atol))), "")
            return CheckResult(False, problem, expected=expected)
        warnings = [f"group {i}: {line}" for i, (out, want) in enumerate(zip(output, expected))
                    for line in layout_warnings(out, want)]
        for i, (out, want) in enumerate(zip(output, expected)):
            reasons = verbose_allclose(out, want, rtol=rtol, atol=atol)
            if reasons:
                return CheckResult(False, mismatches=reasons, group=i, expected=expected, warnings=warnings)
        return CheckResult(True, expected=expected, warnings=warnings)
    problem = contract_problem(output, expected, strict, strict)
    if problem:
        return CheckResult(False, problem + dtype_only_note(output, expected, rtol, atol), expected=expected)
    reasons = verbose_allclose(output, expected, rtol=rtol, atol=atol)
    return CheckResult(not reasons, mismatches=reasons, expected=expected, warnings=layout_warnings(output, expected))


def match_reference(data, output, reference, rtol=1e-05, atol=1e-08) -> tuple[bool, str]:
    """The competition's check: (passed, message)."""
    result = compare(data, output, reference, rtol, atol)
    return result.passed, result.competition_message()


@dataclass
class ReferenceCheck:
    """A task's `check_implementation`: called as the competition calls it, `(data, output) -> (passed,
    message)`; the evaluator asks `compare` for the structured result and reads the tolerance it used."""
    reference: object
    rtol: float = 1e-05
    atol: float = 1e-08

    def __call__(self, data, output) -> tuple[bool, str]:
        return match_reference(data, output, self.reference, self.rtol, self.atol)

    def compare(self, data, output, strict: bool = False) -> CheckResult:
        return compare(data, output, self.reference, self.rtol, self.atol, strict)


@dataclass
class EnvelopeCheck(ReferenceCheck):
    """A check by a precision envelope instead of one tolerance: `outside(data, output) -> bool tensor` marks
    the elements no legitimate precision reaches (a task's own numerics, e.g. tasks/nvfp4_moe/moe_envelope.py).
    rtol and atol stay the task.yml values: the diagnosis matches its hypotheses with them."""
    outside: object = None

    def __call__(self, data, output) -> tuple[bool, str]:
        """As the competition's harness calls it: the envelope decides here too, never the flat tolerance."""
        result = self.compare(data, output)
        if result.passed:
            return True, ""
        return False, result.problem or "\n".join(result.mismatches)

    def compare(self, data, output, strict: bool = False) -> CheckResult:
        """The envelope is computed for the reference's dtype: a dtype unlike it is refused even unless strict
        (these tasks are this project's own, not the competition's); a strided layout is a warning."""
        expected = self.reference(data)
        problem = contract_problem(output, expected, dtype=True, layout=strict)
        if problem:
            return CheckResult(False, problem, expected=expected)
        with torch.no_grad():
            found = self.outside(data, output)       # a mask, or (mask, a line on the output as a whole)
            mask, note = found if isinstance(found, tuple) else (found, "")
            mask = mask | (torch.isnan(output) ^ torch.isnan(expected))
        reasons = _describe(mask, output, expected, 5)
        if reasons:
            reasons[0] = reasons[0].replace("elements:", "elements (outside the precision envelope):")
            if note:
                reasons.insert(1, note)
        return CheckResult(not reasons, mismatches=reasons, expected=expected,
                           warnings=layout_warnings(output, expected))


def make_match_reference(reference, rtol: float = 1e-05, atol: float = 1e-08) -> ReferenceCheck:
    """check_implementation(data, output) bound to a reference and tolerances (the competition's name)."""
    return ReferenceCheck(reference, rtol, atol)
