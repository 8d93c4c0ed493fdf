"""Shared by the diagnosis modules: tolerances, sizes, the Diagnosis type and small formatting helpers."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from arena.taskdef.checking import as_3d  # noqa: F401  (the diagnosers view outputs through it)


RTOL = ATOL = 1e-3        # the task's tolerance (task.yml) unless told otherwise
TILE = 128                # output tile edge in the map
MAP_WIDTH, MAP_HEIGHT = 64, 24
SAMPLE_ELEMENTS = 1 << 23  # cap on rows x cols x K-blocks held by the hypothesis engine
EXACT, NEAR = 0.999, 0.90


@dataclass
class Diagnosis:
    summary: str                                      # one or two plain sentences
    evidence: list = field(default_factory=list)      # short lines backing it
    hypothesis: str | None = None                     # key of the classic bug that matched, if any


# ---- small helpers -----------------------------------------------------------------------------------

def work_dtype(device) -> torch.dtype:
    return torch.float64 if torch.device(device).type == "cpu" else torch.float32


def fmt(x: float) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "nan"
    if x == 0:
        return "0"
    if abs(x) >= 1e4 or abs(x) < 1e-2:
        return f"{x:.3g}"
    return f"{x:.4g}"


def _ranges(idx: list[int]) -> list[tuple[int, int]]:
    runs = []
    for i in idx:
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return [tuple(r) for r in runs]


def index_pattern(bad: torch.Tensor, what: str, tile: int = TILE) -> str | None:
    """A phrase for a set of wrong rows (or columns): periodic stripes, 32-row groups, ranges, tails."""
    bad = bad.bool().cpu()
    n, count = bad.numel(), int(bad.sum())
    if count == 0:
        return None
    if count == n:
        return f"every {what}"
    i = torch.arange(n)
    for period in (32, 64, 128, 16, 8, 4, 2):
        if n < 2 * period:
            continue
        residues = sorted(set((i[bad] % period).tolist()))
        if len(residues) <= max(1, period // 8) and torch.equal(bad, torch.isin(i % period, torch.tensor(residues))):
            which = ", ".join(str(r) for r in residues)
            nth = {2: "2nd", 32: "32nd"}.get(period, f"{period}th")
            return f"only every {nth} {what} ({what} % {period} == {which})"
    if n >= 2 * tile and tile % 32 == 0:
        groups = sorted(set(((i[bad] % tile) // 32).tolist()))
        if len(groups) < tile // 32 and torch.equal(bad, torch.isin((i % tile) // 32, torch.tensor(groups))):
            spans = ", ".join(f"{32 * g}-{32 * g + 31}" for g in groups)
            return f"only {what}s {spans} of every {tile}-{what} tile (32-{what} group{'s' if len(groups) > 1 else ''})"
    runs = _ranges(torch.nonzero(bad).flatten().tolist())
    text = ", ".join(f"{a}-{b}" if b > a else f"{a}" for a, b in runs[:4]) + (f" and {len(runs) - 4} more ranges"
                                                                                  if len(runs) > 4 else "")
    if len(runs) == 1 and runs[0][1] == n - 1 and runs[0][0] > 0:
        first_tile = runs[0][0] // tile
        tail = " (an irregular tail)" if n % tile else ""
        if runs[0][0] % tile == 0 and n - runs[0][0] <= tile:
            return f"only the last {what} tile ({what}s {text}){tail}"
        return f"only the last {what}s ({text}, from {what} tile {first_tile}){tail}"
    if len(runs) == 1 and runs[0][0] % tile == 0 and runs[0][1] - runs[0][0] + 1 == tile:
        return f"only {what} tile {runs[0][0] // tile} ({what}s {text})"
    return f"{what}s {text}"
