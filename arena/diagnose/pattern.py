"""The pattern of a wrong output's errors, cheap to take (the anatomy alone: no hypotheses, no second call):
two failing cases with the same pattern are taken to fail the same way, so only the first is diagnosed in
full (arena/run/evaluator.py Evaluator._diagnose; --diagnose-all diagnoses every one).

The pattern holds what does not depend on luck in the data: NaN/Inf present, all zeros, the share of wrong
elements in coarse steps, and the wrong rows and columns as the anatomy words them (computed here without the
anatomy's error sizes and tile map, which cost seconds on the largest test shapes). A difference in any of
them (a tail bug's rows on another shape, a NaN that appears) gets a full diagnosis again.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from arena.taskdef.checking import mismatch_mask
from arena.diagnose.common import as_3d, index_pattern

SHARE_STEPS = (0.01, 0.1, 0.5, 0.9)     # the share of wrong elements, in these steps


@dataclass(frozen=True)
class FailurePattern:
    key: tuple              # equal keys: the same pattern
    words: str              # the pattern in a few words
    lines: list             # this case's evidence: how many elements are wrong, which rows and columns


def failure_pattern(output, expected, reference) -> FailurePattern | None:
    """The pattern of `output`'s errors against `expected` (one tensor, or a list of tensors such as a group
    GEMM's), or None when there is nothing to compare (then the case is diagnosed in full)."""
    from arena.diagnose.explain import tolerance_of
    outputs = list(output) if isinstance(output, (list, tuple)) else [output]
    expecteds = list(expected) if isinstance(expected, (list, tuple)) else [expected]
    if len(outputs) != len(expecteds) or not outputs:
        return None
    rtol, atol = tolerance_of(reference)
    keys, words, lines = [], [], []
    for i, (out, exp) in enumerate(zip(outputs, expecteds)):
        if not isinstance(out, torch.Tensor) or not isinstance(exp, torch.Tensor) \
                or tuple(out.shape) != tuple(exp.shape) or out.numel() == 0:
            return None
        o3, e3 = as_3d(out), as_3d(exp.to(out.device))
        bad = mismatch_mask(o3, e3, rtol, atol)
        wrong, elements = int(bad.sum()), bad.numel()
        share = wrong / max(1, elements)
        step = sum(share >= s for s in SHARE_STEPS) if wrong else -1
        nan, inf = bool(torch.isnan(o3).any()), bool(torch.isinf(o3).any())
        all_zero = not bool(o3.count_nonzero()) and bool(e3.count_nonzero())
        rows = bad.any(dim=2).any(dim=1)
        cols = bad.any(dim=2).any(dim=0)
        row_pattern = index_pattern(rows, "row") if wrong else None
        col_pattern = index_pattern(cols, "column") if wrong and o3.shape[1] > 1 else None
        keys.append((step, nan, inf, all_zero, row_pattern, col_pattern))
        if not wrong:
            continue
        said = [f"{100 * share:.3g}% of the elements wrong"] + (["NaN"] if nan else []) + (["Inf"] if inf else []) \
            + (["all zeros"] if all_zero else []) + ([f"wrong rows: {row_pattern}"] if row_pattern else []) \
            + ([f"wrong columns: {col_pattern}"] if col_pattern else [])
        words.append((f"output {i}: " if len(outputs) > 1 else "") + ", ".join(said))
        lines.append((f"output {i}: " if len(outputs) > 1 else "") + f"{wrong} of {elements} elements wrong"
                     f" ({100 * share:.3g}%)")
        lines += [f"wrong rows: {row_pattern}"] if row_pattern else []
        lines += [f"wrong columns: {col_pattern}"] if col_pattern else []
    return FailurePattern(tuple(keys), "; ".join(words), lines)
