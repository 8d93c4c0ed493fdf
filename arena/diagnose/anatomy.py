"""The anatomy of a wrong output: NaN/Inf and mismatch counts, all-zero or untouched output (still the
pre-filled `c`), max errors, a character map of the 128x128 output tiles, stripe patterns. Any task whose
output is one tensor."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from arena.taskdef.checking import mismatch_mask
from arena.nvfp4.layouts import ceil_div
from arena.diagnose.common import ATOL, MAP_HEIGHT, MAP_WIDTH, RTOL, TILE, as_3d, fmt, index_pattern

# ---- anatomy -----------------------------------------------------------------------------------------

@dataclass
class Anatomy:
    elements: int
    mismatches: int
    nan: int
    posinf: int
    neginf: int
    expected_nonfinite: int
    all_zero: bool
    untouched: int | None            # elements still equal to the pre-filled output (where it should change)
    untouched_all: bool
    max_abs: float
    max_rel: float
    map_lines: list
    row_pattern: str | None
    col_pattern: str | None
    batch_counts: list
    untouched_tiles: list = field(default_factory=list)   # (batch, tile row, tile col) mostly untouched

    def lines(self) -> list[str]:
        pct = 100.0 * self.mismatches / max(1, self.elements)
        out = [f"{self.mismatches} of {self.elements} elements wrong ({pct:.3g}%); max abs error "
               f"{fmt(self.max_abs)}, max rel error {fmt(self.max_rel)}"]
        if self.nan or self.posinf or self.neginf:
            out.append(f"output holds {self.nan} NaN, {self.posinf} +Inf, {self.neginf} -Inf "
                       f"(the reference holds {self.expected_nonfinite} non-finite values)")
        if self.all_zero:
            out.append("the output is all zeros")
        if self.untouched_all:
            out.append("the output is exactly the pre-filled c it was given")
        elif self.untouched and self.untouched > max(1, self.elements // 1000):
            out.append(f"{self.untouched} elements still hold the pre-filled c")
        if len(self.batch_counts) > 1:
            shown = ", ".join(f"l={l}: {n}" for l, n in enumerate(self.batch_counts[:16]))
            more = len(self.batch_counts) - 16
            out.append("wrong per batch: " + shown + (f", … ({more} more batches)" if more > 0 else ""))
        if self.row_pattern:
            out.append(f"wrong rows: {self.row_pattern}")
        if self.col_pattern:
            out.append(f"wrong columns: {self.col_pattern}")
        return out + self.map_lines


@torch.no_grad()
def anatomy(output: torch.Tensor, expected: torch.Tensor, prefilled: torch.Tensor | None = None,
            rtol: float = RTOL, atol: float = ATOL) -> Anatomy:
    """Where and how `output` differs from `expected` (same shape)."""
    out, exp = as_3d(output), as_3d(expected.to(output.device))
    pre = as_3d(prefilled.to(output.device)) if prefilled is not None else None
    bad = mismatch_mask(out, exp, rtol, atol)
    o64, e64 = out.double(), exp.double()
    finite = torch.isfinite(o64) & torch.isfinite(e64) & bad
    diff = (o64 - e64).abs()
    max_abs = float(diff[finite].max()) if finite.any() else 0.0
    floor = max(atol, 1e-3 * float(e64[torch.isfinite(e64)].pow(2).mean().sqrt())) if torch.isfinite(e64).any() else atol
    max_rel = float((diff[finite] / e64[finite].abs().clamp(min=floor)).max()) if finite.any() else 0.0
    untouched_mask = None
    untouched_all = False
    if pre is not None and pre.shape == out.shape:
        changes = mismatch_mask(pre, exp, 0.0, 0.0)                 # where a correct kernel must write

        def same(a, b):     # element-wise equal (fp16 compared by its bits)
            return a.view(torch.int16) == b.view(torch.int16) if out.dtype == torch.float16 else a == b
        untouched_mask = same(out, pre) & changes
        untouched_all = bool(torch.equal(out, pre))
        # Equal to the pre-filled value by chance (wrong values of its own distribution, a bf16 grid): counted
        # against the same output beside the pre-filled output shifted by one element, whose equalities are
        # chance alone. Not clearly above that, they are evidence of nothing.
        chance = int((same(out, pre.flatten().roll(1).view_as(pre)) & changes).sum())
        if not untouched_all and int(untouched_mask.sum()) <= 4 * chance + 2:
            untouched_mask = torch.zeros_like(untouched_mask)
    rows_bad = bad.any(dim=1).any(dim=1)
    cols_bad = bad.any(dim=0).any(dim=1)
    m, n, l = out.shape
    an = Anatomy(
        elements=out.numel(), mismatches=int(bad.sum()), nan=int(torch.isnan(o64).sum()),
        posinf=int(torch.isposinf(o64).sum()), neginf=int(torch.isneginf(o64).sum()),
        expected_nonfinite=int((~torch.isfinite(e64)).sum()),
        all_zero=bool((o64 == 0).all()) and not bool((e64 == 0).all()),
        untouched=int(untouched_mask.sum()) if untouched_mask is not None else None,
        untouched_all=untouched_all, max_abs=max_abs, max_rel=max_rel,
        map_lines=[], row_pattern=index_pattern(rows_bad, "row") if rows_bad.any() else None,
        col_pattern=index_pattern(cols_bad, "column") if cols_bad.any() and n > 1 else None,
        batch_counts=[int(bad[:, :, i].sum()) for i in range(l)])
    if an.mismatches:
        an.map_lines, an.untouched_tiles = _tile_map(bad, o64, e64, untouched_mask)
    return an


def tile_counts(mask: torch.Tensor, th: int, tw: int) -> torch.Tensor:
    """Per (th x tw) cell and batch, how many elements of a [M, N, L] mask are set (on the CPU)."""
    m, n, l = mask.shape
    rows, cols = ceil_div(m, th), ceil_div(n, tw)
    padded = torch.zeros((rows * th, cols * tw, l), dtype=torch.int32, device=mask.device)
    padded[:m, :n] = mask.to(torch.int32)
    return padded.reshape(rows, th, cols, tw, l).sum((1, 3)).cpu()


def _tile_map(bad, o64, e64, untouched):
    """A character per 128x128 tile (grouped when the grid is large), for each batch with errors."""
    m, n, l = bad.shape
    tr, tc = ceil_div(m, TILE), ceil_div(n, TILE)
    gr, gc = ceil_div(tr, MAP_HEIGHT), ceil_div(tc, MAP_WIDTH)      # tiles per character
    th, tw = TILE * gr, TILE * gc
    wrong = tile_counts(bad, th, tw)
    total = tile_counts(torch.ones_like(bad), th, tw)
    nonfinite = tile_counts(~torch.isfinite(o64) & torch.isfinite(e64), th, tw)
    zero = tile_counts((o64 == 0) & (e64 != 0), th, tw)
    kept = tile_counts(untouched, th, tw) if untouched is not None else torch.zeros_like(wrong)
    lines, untouched_tiles, shown = [], [], 0
    unit = f"{th}x{tw}"
    for b in range(l):
        if not int(wrong[:, :, b].sum()):
            continue
        if shown == 2:
            lines.append("(maps of further batches left out)")
            break
        shown += 1
        lines.append(f"{unit} output tiles" + (f", batch {b}" if l > 1 else "") +
                     " ('.' right, 'x' some wrong, '#' mostly wrong, 'u' untouched, '0' zeros, '!' NaN/Inf):")
        for i in range(wrong.shape[0]):
            chars = []
            for j in range(wrong.shape[1]):
                w, t = int(wrong[i, j, b]), int(total[i, j, b])
                if w == 0:
                    chars.append(".")
                elif nonfinite[i, j, b]:
                    chars.append("!")
                elif 2 * int(kept[i, j, b]) >= w and 2 * w >= t:
                    chars.append("u")
                    untouched_tiles.append((b, i, j))
                elif int(zero[i, j, b]) == w == t:
                    chars.append("0")
                elif 2 * w >= t:
                    chars.append("#")
                else:
                    chars.append("x")
            lines.append("  " + "".join(chars))
    return lines, untouched_tiles
