"""Races: the same inputs give different outputs from call to call.

A race (a missing barrier, fence or wait; with tcgen05 a missing `tcgen05.wait::ld`, a missing commit, or a
shared-memory stage reused before the MMA reading it finished) lands differently on each call, so a single
wrong output can look like any classic bug: a tile from a half-finished accumulator reads as "the last K
tile missing". `second_call` runs the submission once more on identical inputs after a failed check and
names a race when the two outputs differ by more than the tolerance. `eval.py diagnose` compares three
calls bit for bit (probes.probe_repeat).
"""
from __future__ import annotations

import torch

from arena.taskdef.checking import mismatch_mask
from arena.audit.reply_audit import differing_elements
from arena.diagnose.anatomy import tile_counts
from arena.diagnose.common import TILE, Diagnosis, as_3d

RACE_CAUSES = ("a missing barrier, fence or wait: with tcgen05, a tcgen05.ld read before tcgen05.wait::ld, an MMA "
               "whose tcgen05.commit is missing or not waited on, or a shared-memory stage refilled before the MMA "
               "reading it finished")


def differing_tiles(diff: torch.Tensor, limit: int = 6) -> list[str]:
    """The 128x128 output tiles (batch, rows, cols) holding set elements of a difference mask, at most `limit`."""
    if diff.dim() < 2:
        return [f"elements {', '.join(str(int(i)) for i in torch.nonzero(diff.flatten())[:limit].flatten())}"]
    grid = as_3d(diff)
    rows, cols, _ = grid.shape
    found = torch.nonzero(tile_counts(grid, TILE, TILE))[:limit].tolist()
    return [f"batch {bt}, rows {tr * TILE}-{min(rows, (tr + 1) * TILE) - 1}, cols {tc * TILE}-{min(cols, (tc + 1) * TILE) - 1}"
            for tr, tc, bt in found]


def _tensors(output) -> list[torch.Tensor]:
    from arena.taskdef.nested import tensors_in
    return [t.detach() for _, t in tensors_in(output, "output")]


def _wrong(output: torch.Tensor, expected, rtol: float, atol: float) -> int | None:
    if not isinstance(expected, torch.Tensor) or expected.shape != output.shape:
        return None
    return int(mismatch_mask(output, expected.to(output.device), rtol, atol).sum())


def second_call(rerun, inputs, output, expected, rtol: float, atol: float) -> tuple[Diagnosis | None, list[str]]:
    """Call the submission again (`rerun(inputs)`, on inputs identical to the first call's) and compare.

    Returns (a race Diagnosis or None, evidence lines for the other diagnoses). Outputs that differ only
    within the tolerance (partial sums added in a varying order) are not called a race; a second call that
    fails is an evidence line, not a verdict."""
    try:
        again = rerun(inputs)
    except Exception as error:          # the first call's output is still worth a diagnosis
        first = str(error).splitlines()[0] if str(error) else ""
        return None, [f"a second call on identical inputs failed: {type(error).__name__}: {first}"]
    first, second = _tensors(output), _tensors(again)
    if len(first) != len(second) or any((a.shape, a.dtype) != (b.shape, b.dtype) for a, b in zip(first, second)):
        shapes = lambda ts: ", ".join(f"{tuple(t.shape)} {t.dtype}" for t in ts)     # noqa: E731
        return (Diagnosis(f"The output differs between two calls on identical inputs: the first returned "
                          f"{shapes(first)}, the second {shapes(second)}.", [], "race"), [])
    expected_list = expected if isinstance(expected, (list, tuple)) else [expected]
    beyond, bitwise, lines = 0, 0, []
    for i, (a, b) in enumerate(zip(first, second)):
        b = b.to(a.device)
        if not bool(differing_elements(a, b).any()):
            continue
        mask = mismatch_mask(a, b, rtol, atol)
        bitwise += 1
        beyond += int(mask.sum())
        if bool(mask.any()):
            label = "" if len(first) == 1 else f"output {i}: "
            want = expected_list[i] if i < len(expected_list) else None
            wrong = (_wrong(a, want, rtol, atol), _wrong(b, want, rtol, atol))
            counts = "" if None in wrong else f"; wrong elements: {wrong[0]} in call 1, {wrong[1]} in call 2"
            lines.append(f"{label}{int(mask.sum())} of {a.numel()} elements differ beyond the tolerance{counts}")
            lines.append(f"{label}differing tiles: " + "; ".join(differing_tiles(mask)))
    if beyond:
        return (Diagnosis(f"The output differs between two calls on identical inputs: a race ({RACE_CAUSES}). "
                          f"{beyond} elements changed beyond the tolerance; fix the synchronisation first, since any "
                          "other reading of one wrong output describes one random outcome.", lines, "race"), [])
    if bitwise:
        return None, ["a second call on identical inputs differs only within the tolerance (partial sums added in "
                      "a varying order): not the cause of the failure"]
    return None, ["a second call on identical inputs gave the same bits (no race seen)"]
