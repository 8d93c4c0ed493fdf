"""The hook the test and benchmark paths call after a failed check: recompute the reference on pristine
inputs and explain the wrong output, one tensor (`verdict.diagnose`) or a list of groups
(`groups.diagnose_groups`). Never raises."""
from __future__ import annotations

import time

import torch

from arena.taskdef.checking import ReferenceCheck
from arena.audit.reply_audit import same_bits
from arena.diagnose.common import ATOL, RTOL, Diagnosis
from arena.diagnose.hypotheses import is_gemm_contract
from arena.diagnose.verdict import diagnose
from arena.diagnose.groups import diagnose_groups, is_group_contract
from arena.diagnose.races import second_call


def _inputs_of(data) -> list:
    """The tensors a correct kernel reads (everything but the pre-filled outputs)."""
    from arena.taskdef.nested import tensors_in
    if is_group_contract(data):
        return [t for abc in data[0] for t in abc[:2]] + [t for part in data[1:3] for pair in part for t in pair]
    return [t for _, t in tensors_in(data[:-1] if isinstance(data, (tuple, list)) else data)]


def tolerance_of(reference) -> tuple[float, float]:
    """(rtol, atol) the task's check uses (task.yml), else the common default."""
    check = getattr(reference, "check_implementation", None)
    return (check.rtol, check.atol) if isinstance(check, ReferenceCheck) else (RTOL, ATOL)


def prefilled_of(data):
    """The pre-filled output(s): c, or each group's c."""
    if is_group_contract(data):
        return [abc[2] for abc in data[0]]
    return data[-1] if isinstance(data, (tuple, list)) and isinstance(data[-1], torch.Tensor) else None


def _expected_from(reference, data, fresh):
    """The reference output for `data` (recomputed on a clone of the pristine inputs when we have them)."""
    from arena.taskdef.nested import clone_data
    if fresh is not None and is_gemm_contract(data) and isinstance(fresh[6], torch.Tensor) \
            and not torch.equal(data[6], fresh[6]):
        return data[6]          # the reference wrote its result into the parent's c during the check
    return reference.ref_kernel(clone_data(fresh if fresh is not None else data))


def _task_diagnosis(own, data, output, expected, prefilled, rtol, atol) -> Diagnosis | None:
    """The task's `diagnose_failure(data, output, expected, rtol, atol) -> (summary, evidence, key) | None`
    (its reference.py), after the contract-free anatomy: an untouched or all-zero output is said as for any
    task; the anatomy's lines lead the evidence."""
    general = diagnose(data, output, expected, prefilled, rtol, atol, hypotheses=False)
    if general is not None and general.hypothesis in ("untouched", "all_zero", "unwritten_tiles"):
        return general
    found = own(data, output, expected, rtol, atol)
    if found is None:
        return general
    summary, evidence, key = found
    # "per batch" means the last dimension of an [M, N, L] output; for other shapes it says nothing
    kept = [line for line in (general.evidence if general else [])
            if output.dim() == 3 or not line.startswith("wrong per batch")]
    return Diagnosis(summary, kept + list(evidence), key)


def explain_failure(reference, data, output, regenerate=None, rerun=None) -> Diagnosis | None:
    """The hook for a failed check: never raises; a failure of the diagnostics becomes one line. The tolerance
    is the one the task's check used (task.yml), else the common default.

    With `rerun` (a function that calls the submission once on given inputs and returns its output) and
    `regenerate`, the submission runs a second time on a copy of the regenerated inputs (checked identical to
    the first call's): outputs that differ beyond the tolerance are named a race before any other reading."""
    started = time.perf_counter()
    rtol, atol = tolerance_of(reference)
    grouped = is_group_contract(data)
    try:
        if not isinstance(output, torch.Tensor) and not (grouped and isinstance(output, (list, tuple))):
            return None
        fresh = None
        if regenerate is not None:
            fresh = regenerate()
            mine, theirs = _inputs_of(data), _inputs_of(fresh) if type(fresh) is type(data) else []
            fresh = fresh if len(mine) == len(theirs) and all(map(same_bits, mine, theirs)) else None
        expected = _expected_from(reference, data, fresh)
        prefilled = prefilled_of(fresh) if fresh is not None else None
        repeat_lines = []
        if rerun is not None and fresh is not None:
            from arena.taskdef.nested import clone_data
            race, repeat_lines = second_call(rerun, clone_data(fresh), output, expected, rtol, atol)
            if race is not None:
                race.evidence.append(f"(diagnosis took {time.perf_counter() - started:.1f} s)")
                return race
        own = getattr(reference, "diagnose_failure", None)       # a task's own stages and classic bugs
        if own is not None and not grouped:
            found = _task_diagnosis(own, data, output, expected, prefilled, rtol, atol)
        elif grouped:
            found = diagnose_groups(data, output, expected, prefilled, rtol, atol)
        elif isinstance(expected, torch.Tensor) and expected.shape == output.shape:
            found = diagnose(data, output, expected, prefilled, rtol, atol)
        else:
            return None
        if found is not None:
            found.evidence += repeat_lines
            found.evidence.append(f"(diagnosis took {time.perf_counter() - started:.1f} s)")
        return found
    except Exception as error:      # the diagnosis must never cost the user their results
        return Diagnosis(f"(no diagnosis: the diagnostics failed: {type(error).__name__}: "
                         f"{str(error).splitlines()[0] if str(error) else ''})", [], None)
