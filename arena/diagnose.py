"""Explaining wrong outputs: why did this case fail, in one or two plain sentences, with the evidence.

Three tools, used by the test/benchmark paths (on the parent's own data, after a failed check) and by
`python eval.py diagnose` (which also runs probes):

- anatomy: NaN/Inf and mismatch counts, all-zero or untouched output (still the pre-filled `c`), max
  errors, a character map of the 128x128 output tiles, and stripe patterns in the wrong rows/columns.
  Works for any task whose output is one tensor.
- hypotheses (nvfp4_gemm contract only): the output is compared with references computed under the
  classic bugs (one operand's nibbles swapped, scales ignored or exchanged, the blocked scale layout misread
  in the usual ways, a K tile missing, output transposed or in the wrong batch, low-precision
  accumulation). They run on a sample of rows and columns, so they stay cheap for the largest shapes.
- probes: structured inputs (all-ones, one-hot scale maps) that show which scale byte the kernel applied
  where, beside the expected mapping.

A nibble swap in BOTH operands is invisible in a GEMM (the same permutation inside every 16-block), and a
swap in A alone gives exactly the same output as a swap in B alone, so the diagnosis names "one operand".
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import torch

from arena.checking import mismatch_mask
from arena.formats import BLOCK_SIZE, E2M1_VALUES, as_bytes, decode_e4m3, unpack_codes
from arena.layouts import COLS_PER_TILE, ROWS_PER_TILE, TILE_BYTES, ceil_div, to_permuted

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

def _work_dtype(device) -> torch.dtype:
    return torch.float64 if torch.device(device).type == "cpu" else torch.float32


def _fmt(x: float) -> str:
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


def _as_3d(t: torch.Tensor) -> torch.Tensor:
    """View any output as [rows, cols, batches] for maps and stripes."""
    if t.dim() == 3:
        return t
    if t.dim() == 2:
        return t.unsqueeze(-1)
    if t.dim() == 1:
        return t.reshape(-1, 1, 1)
    return t.reshape(t.shape[0], t.shape[1], -1)


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
               f"{_fmt(self.max_abs)}, max rel error {_fmt(self.max_rel)}"]
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
            out.append("wrong per batch: " + ", ".join(f"l={l}: {n}" for l, n in enumerate(self.batch_counts)))
        if self.row_pattern:
            out.append(f"wrong rows: {self.row_pattern}")
        if self.col_pattern:
            out.append(f"wrong columns: {self.col_pattern}")
        return out + self.map_lines


@torch.no_grad()
def anatomy(output: torch.Tensor, expected: torch.Tensor, prefilled: torch.Tensor | None = None,
            rtol: float = RTOL, atol: float = ATOL) -> Anatomy:
    """Where and how `output` differs from `expected` (same shape)."""
    out, exp = _as_3d(output), _as_3d(expected.to(output.device))
    pre = _as_3d(prefilled.to(output.device)) if prefilled is not None else None
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
        untouched_mask = (out.view(torch.int16) == pre.view(torch.int16)) if out.dtype == torch.float16 \
            else (out == pre)
        untouched_mask &= changes
        untouched_all = bool(torch.equal(out, pre))
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


def _tile_counts(mask: torch.Tensor, th: int, tw: int) -> torch.Tensor:
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
    wrong = _tile_counts(bad, th, tw)
    total = _tile_counts(torch.ones_like(bad), th, tw)
    nonfinite = _tile_counts(~torch.isfinite(o64) & torch.isfinite(e64), th, tw)
    zero = _tile_counts((o64 == 0) & (e64 != 0), th, tw)
    kept = _tile_counts(untouched, th, tw) if untouched is not None else torch.zeros_like(wrong)
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


# ---- the nvfp4_gemm contract ---------------------------------------------------------------------------

def is_gemm_contract(data, output=None) -> bool:
    """The 7-tuple (a, b, sfa, sfb, sfa_permuted, sfb_permuted, c) with c [M, N, L] = A·Bᵀ."""
    if not isinstance(data, (tuple, list)) or len(data) != 7 or not all(isinstance(t, torch.Tensor) for t in data):
        return False
    a, b, sfa, sfb, pa, pb, c = data
    if a.dim() != 3 or b.dim() != 3 or c.dim() != 3 or sfa.dim() != 3 or sfb.dim() != 3 or pa.dim() != 6 or pb.dim() != 6:
        return False
    if a.dtype not in (torch.float4_e2m1fn_x2, torch.uint8) or sfa.dtype != torch.float8_e4m3fn:
        return False
    m, n, l, k = a.shape[0], b.shape[0], a.shape[2], a.shape[1] * 2
    if tuple(c.shape) != (m, n, l) or b.shape[1] * 2 != k or k % BLOCK_SIZE:
        return False
    if tuple(sfa.shape) != (m, k // BLOCK_SIZE, l) or tuple(sfb.shape) != (n, k // BLOCK_SIZE, l):
        return False
    if output is not None and (not isinstance(output, torch.Tensor) or tuple(output.shape) != (m, n, l)):
        return False
    return True


# Ways a kernel misreads the blocked scale layout: byte offset read for scale (row r, K-block j).
# Each maps index tensors (rb, rr = r % 128, r4, r32, cb, c4, RB, CB, SK) to an offset.
LAYOUT_BUGS = {
    "rows_plain": ("the 32-row and 4-row-group roles swapped inside a 128x4 scale tile "
                   "(the tile read as plain row-major 128x4)",
                   lambda rb, rr, r4, r32, cb, c4, RB, CB, SK, r, j: (rb * CB + cb) * TILE_BYTES + rr * 4 + c4),
    "inner_transposed": ("the 4-row-group and K-position indices swapped inside each 16-byte scale row",
                         lambda rb, rr, r4, r32, cb, c4, RB, CB, SK, r, j:
                         (rb * CB + cb) * TILE_BYTES + r32 * 16 + c4 * 4 + r4),
    "kgroup_swapped": ("the K tile (group of 4 scales) and the position inside the group swapped",
                       lambda rb, rr, r4, r32, cb, c4, RB, CB, SK, r, j:
                       (rb * CB + c4) * TILE_BYTES + r32 * 16 + r4 * 4 + cb),
    "ktile_stride": ("a wrong stride between K tiles (4 tiles of 512 bytes per K tile instead of 1)",
                     lambda rb, rr, r4, r32, cb, c4, RB, CB, SK, r, j:
                     (rb * CB + 4 * cb) * TILE_BYTES + r32 * 16 + r4 * 4 + c4),
    "tile_order": ("the 512-byte scale tiles walked K-tile-major (row tiles inner) instead of row-tile-major",
                   lambda rb, rr, r4, r32, cb, c4, RB, CB, SK, r, j:
                   (cb * RB + rb) * TILE_BYTES + r32 * 16 + r4 * 4 + c4),
    "permuted_contiguous": ("the permuted scales made .contiguous() (logical order) before being read as "
                            "the blocked layout", None),
    "plain_as_blocked": ("the plain [MN, K/16] scales read as if they were in the blocked layout", None),
    "blocked_as_plain": ("the blocked (permuted) scales read as if they were plain row-major [MN, K/16]", None),
}


def _blocked_offsets(mn: int, sk: int, device, kind: str = "correct") -> torch.Tensor:
    rb_count, cb_count = ceil_div(mn, ROWS_PER_TILE), ceil_div(sk, COLS_PER_TILE)
    r = torch.arange(mn, device=device).unsqueeze(1)
    j = torch.arange(sk, device=device).unsqueeze(0)
    rb, rr = r // ROWS_PER_TILE, r % ROWS_PER_TILE
    r4, r32 = rr // 32, rr % 32
    cb, c4 = j // COLS_PER_TILE, j % COLS_PER_TILE
    if kind in ("correct", "permuted_contiguous", "plain_as_blocked"):
        return (rb * cb_count + cb) * TILE_BYTES + r32 * 16 + r4 * 4 + c4
    if kind == "blocked_as_plain":
        return r * sk + j
    return LAYOUT_BUGS[kind][1](rb, rr, r4, r32, cb, c4, rb_count, cb_count, sk, r, j)


def _gather(buffer: torch.Tensor, offsets: torch.Tensor, dtype, fill: float = float("nan")) -> torch.Tensor:
    """buffer[offsets] as values; `fill` where the offset falls outside the buffer (NaN: unknown memory)."""
    inside = (offsets >= 0) & (offsets < buffer.numel())
    values = decode_e4m3(buffer.view(torch.uint8).reshape(-1)[offsets.clamp(0, buffer.numel() - 1)], dtype)
    return torch.where(inside, values, torch.full_like(values, fill))


def _batch_blocked_bytes(perm: torch.Tensor, batch: int) -> torch.Tensor:
    """One batch's blocked bytes in memory order (uint8), from the permuted 6-D view."""
    return perm.view(torch.uint8).permute(5, 2, 4, 0, 1, 3)[batch].reshape(-1)


def misread_scales(kind: str, plain: torch.Tensor, perm: torch.Tensor, batch: int, dtype=torch.float64,
                   fill: float = float("nan")) -> torch.Tensor:
    """The scales [MN, K/16] a kernel with layout bug `kind` applies in `batch`; reads outside the batch's
    buffer give `fill` (NaN = unknown memory; 0 = what a TMA load returns out of bounds)."""
    mn, sk = plain.shape[0], plain.shape[1]
    offsets = _blocked_offsets(mn, sk, plain.device, kind)
    if kind == "permuted_contiguous":
        batch_bytes = ceil_div(mn, ROWS_PER_TILE) * ceil_div(sk, COLS_PER_TILE) * TILE_BYTES
        return _gather(perm.view(torch.uint8).contiguous().reshape(-1), offsets + batch * batch_bytes, dtype, fill)
    if kind == "plain_as_blocked":
        return _gather(plain.view(torch.uint8)[:, :, batch].contiguous().reshape(-1), offsets, dtype, fill)
    return _gather(_batch_blocked_bytes(perm, batch), offsets, dtype, fill)


@dataclass
class Match:
    key: str
    text: str
    agree: float          # fraction of the known sampled elements where the output equals this hypothesis
    explained: float      # fraction of the known wrong sampled elements it reproduces
    known: float          # fraction of the sample it predicts (the rest read memory outside a buffer)
    wrong_known: int
    note: str = ""

    def line(self) -> str:
        k = "" if self.known >= 0.999 else f", predicts {100 * self.known:.0f}% of the sample"
        return f"{self.key}: agrees on {100 * self.agree:.1f}%, reproduces {100 * self.explained:.1f}% " \
               f"of the wrong elements{k}"


class _Sample:
    """One batch of a gemm case restricted to sampled rows/cols, with per-16-block partial products."""

    def __init__(self, data, batch: int, rows: torch.Tensor, cols: torch.Tensor):
        a, b, sfa, sfb, pa, pb, c = data
        self.data, self.batch, self.rows, self.cols = data, batch, rows, cols
        self.device = c.device
        self.dtype = _work_dtype(self.device)
        self.m, self.n, self.k = a.shape[0], b.shape[0], a.shape[1] * 2
        self.j = self.k // BLOCK_SIZE
        self.a_codes = unpack_codes(as_bytes(a)[:, :, batch][rows.to(a.device)]).to(self.device)
        self.b_codes = unpack_codes(as_bytes(b)[:, :, batch][cols.to(b.device)]).to(self.device)
        self.sfa = decode_e4m3(sfa.view(torch.uint8)[:, :, batch].contiguous(), self.dtype).to(self.device)
        self.sfb = decode_e4m3(sfb.view(torch.uint8)[:, :, batch].contiguous(), self.dtype).to(self.device)
        self.blocks = self._blocks(self.a_codes, self.b_codes)

    def _values(self, codes):
        lut = torch.tensor(E2M1_VALUES, dtype=self.dtype, device=self.device)
        return lut[codes.long()]

    def _blocks(self, a_codes, b_codes) -> torch.Tensor:
        """U[j, r, c] = sum over K-block j of a*b (unscaled)."""
        av = self._values(a_codes).reshape(len(self.rows), self.j, BLOCK_SIZE).transpose(0, 1)
        bv = self._values(b_codes).reshape(len(self.cols), self.j, BLOCK_SIZE).permute(1, 2, 0)
        with _no_tf32():
            return torch.bmm(av, bv)

    def scaled(self, sa_full, sb_full, blocks=None) -> torch.Tensor:
        """sum_j sa[r, j] sb[c, j] U[j, r, c] on the sample, NaN where a scale is unknown."""
        blocks = self.blocks if blocks is None else blocks
        sa = sa_full[self.rows.to(sa_full.device)].to(self.device, self.dtype)
        sb = sb_full[self.cols.to(sb_full.device)].to(self.device, self.dtype)
        weighted = blocks * sa.T.unsqueeze(2)           # elementwise beats einsum here (2-7x on the CPU)
        weighted.mul_(sb.T.unsqueeze(1))
        return weighted.sum(0)

    def per_block(self) -> torch.Tensor:
        sa = self.sfa[self.rows.to(self.sfa.device)].to(self.device)
        sb = self.sfb[self.cols.to(self.sfb.device)].to(self.device)
        return self.blocks * sa.T.unsqueeze(2) * sb.T.unsqueeze(1)


class _no_tf32:
    def __enter__(self):
        self.saved = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = False

    def __exit__(self, *exc):
        torch.backends.cuda.matmul.allow_tf32 = self.saved


def _pick(bad_any: torch.Tensor, limit: int, generator) -> torch.Tensor:
    """Up to `limit` indices: half from the wrong ones, the rest spread at random; sorted."""
    n = bad_any.numel()
    if n <= limit:
        return torch.arange(n)
    wrong = torch.nonzero(bad_any.cpu()).flatten()
    take = wrong[torch.randperm(len(wrong), generator=generator)[: limit // 2]]
    others = torch.nonzero(~torch.isin(torch.arange(n), take)).flatten()
    take = torch.cat((take, others[torch.randperm(len(others), generator=generator)[: limit - len(take)]]))
    return torch.sort(take).values


@torch.no_grad()
def gemm_hypotheses(data, output: torch.Tensor, expected: torch.Tensor, rtol: float = RTOL,
                    atol: float = ATOL) -> tuple[list[Match], list[str]]:
    """Score every classic bug against the output; (matches sorted best first, notes)."""
    a, b, sfa, sfb, pa, pb, c = data
    m, n, l = c.shape
    out, exp = output.to(c.device), expected.to(c.device)
    bad = mismatch_mask(out, exp, rtol, atol)
    batch = int(torch.argmax(bad.reshape(-1, l).sum(0)))            # the batch with the most errors
    matches, notes = [], []

    def full(key, text, hyp, mask=None):
        """A hypothesis given as a whole [M, N] fp16 tensor."""
        ok = ~mismatch_mask(out[:, :, batch], hyp, rtol, atol)
        wrong = bad[:, :, batch]
        if mask is not None:
            ok, wrong = ok[mask], wrong[mask]
        matches.append(Match(key, text, float(ok.float().mean()), float(ok[wrong].float().mean()) if wrong.any() else 0.0,
                             1.0, int(wrong.sum())))

    # Whole-tensor hypotheses (cheap).
    if m == n:
        full("transposed", "the output written transposed (C = B·Aᵀ, or rows and columns swapped)",
             exp[:, :, batch].T)
    for other in range(l):
        if other != batch:
            full(f"batch_{other}", f"batch {batch} holding the result of batch {other} (wrong L index)", exp[:, :, other])
    bf16_round = exp[:, :, batch].to(torch.bfloat16).to(exp.dtype)
    if not torch.equal(bf16_round, exp[:, :, batch]):
        full("bf16_output", "the result rounded through bfloat16 before being stored as fp16", bf16_round)

    # Sampled hypotheses.
    k = a.shape[1] * 2
    j_blocks = k // BLOCK_SIZE
    limit = max(16, min(128, int(math.sqrt(SAMPLE_ELEMENTS / max(1, j_blocks)))))
    generator = torch.Generator().manual_seed(0)
    bad_b = bad[:, :, batch]
    rows = _pick(bad_b.any(1), limit, generator)
    cols = _pick(bad_b.any(0), limit, generator)
    sample = _Sample(data, batch, rows, cols)
    o = out[:, :, batch][rows.to(out.device)][:, cols.to(out.device)]
    e = exp[:, :, batch][rows.to(exp.device)][:, cols.to(exp.device)]
    wrong = mismatch_mask(o, e, rtol, atol)
    notes.append(f"hypotheses scored on batch {batch}, {len(rows)} rows x {len(cols)} columns "
                 f"({int(wrong.sum())} of them wrong)")

    def scored(key, text, value, note=""):
        known = ~torch.isnan(value)
        h = value.to(o.dtype)
        ok = ~mismatch_mask(o, h, rtol, atol) & known
        kw = wrong & known
        n_known = int(known.sum())
        matches.append(Match(key, text, float(ok.sum()) / max(1, n_known),
                             float((ok & kw).sum()) / max(1, int(kw.sum())), n_known / known.numel(),
                             int(kw.sum()), note))

    def partial(key, text, h_a, h_b=None, h_ab=None, how=""):
        """The bug hit only some rows of A and/or of B (a tail path, one tile): choose per A row and per
        B row between the right computation and the bug, by majority of that row's elements."""
        def fits(h):
            return torch.zeros_like(wrong) if h is None else \
                ~mismatch_mask(o, h.to(o.dtype), rtol, atol) & ~torch.isnan(h)
        ok_cc, ok_a, ok_b, ok_ab = ~wrong, fits(h_a), fits(h_b), fits(h_ab)
        # Alternate: A rows given the B rows, then B rows given the A rows (an element often fits a bug on
        # either side, e.g. a nibble swap in A or in B; the row/column structure decides).
        b_bug = torch.zeros(len(cols), dtype=torch.bool, device=wrong.device)
        for _ in range(3):
            hit, miss = torch.where(b_bug.unsqueeze(0), ok_ab, ok_a), torch.where(b_bug.unsqueeze(0), ok_b, ok_cc)
            a_bug = _row_flags((hit & ~miss).sum(1), (miss & ~hit).sum(1), rows).to(wrong.device)
            hit, miss = torch.where(a_bug.unsqueeze(1), ok_ab, ok_b), torch.where(a_bug.unsqueeze(1), ok_a, ok_cc)
            b_bug = _row_flags((hit & ~miss).sum(0), (miss & ~hit).sum(0), cols).to(wrong.device)
        if not (bool(a_bug.any()) and not bool(a_bug.all())) and not (bool(b_bug.any()) and not bool(b_bug.all())):
            return                      # nothing, or the whole-operand hypotheses already scored
        a_rows, b_rows = a_bug.to(wrong.device).unsqueeze(1), b_bug.to(wrong.device).unsqueeze(0)
        fit = torch.where(a_rows & b_rows, ok_ab, torch.where(a_rows, ok_a, torch.where(b_rows, ok_b, ok_cc)))
        parts = [f"{_describe_rows(rows, a_bug.cpu(), m)} of A" if a_bug.any() else "",
                 f"{_describe_rows(cols, b_bug.cpu(), n)} of B" if b_bug.any() else ""]
        where = " and ".join(p for p in parts if p)
        matches.append(Match(f"{key}_partial", f"{text}, but only for {where}{how}", float(fit.float().mean()),
                             float(fit[wrong].float().mean()) if wrong.any() else 0.0, 1.0, int(wrong.sum()),
                             "partial"))

    ones_a, ones_b = torch.ones_like(sample.sfa), torch.ones_like(sample.sfb)
    h_ab, h_a, h_b = (sample.scaled(ones_a, ones_b), sample.scaled(ones_a, sample.sfb),
                      sample.scaled(sample.sfa, ones_b))
    scored("scales_ignored", "the block scales ignored (all taken as 1)", h_ab)
    scored("sfa_ignored", "SFA ignored (taken as 1)", h_a)
    scored("sfb_ignored", "SFB ignored (taken as 1)", h_b)
    partial("scales_ignored", "the block scales ignored (taken as 1)", h_a, h_b, h_ab)
    if m == n:
        scored("scales_exchanged", "SFA and SFB exchanged (A scaled by SFB, B by SFA)",
               sample.scaled(sample.sfb, sample.sfa))
    swap_a = sample.a_codes.reshape(len(rows), -1, 2).flip(-1).reshape(len(rows), -1)
    swap_b = sample.b_codes.reshape(len(cols), -1, 2).flip(-1).reshape(len(cols), -1)
    h_a = sample.scaled(sample.sfa, sample.sfb, sample._blocks(swap_a, sample.b_codes))
    scored("nibble_swap", "the two fp4 values of each byte swapped in ONE operand (high nibble taken as "
           "element 0; a GEMM cannot tell A from B, and a swap in both would be invisible)", h_a)
    partial("nibble_swap", "the two fp4 values of each byte swapped (high nibble taken as element 0)", h_a,
            sample.scaled(sample.sfa, sample.sfb, sample._blocks(sample.a_codes, swap_b)), e.double())
    for kind, (text, _) in LAYOUT_BUGS.items():
        for fill, how in ((float("nan"), ""), (0.0, " (reads past the end of the scale buffer returning zeros, "
                                                     "as a TMA load does)")):
            try:
                wa = misread_scales(kind, sfa, pa, batch, sample.dtype, fill).to(sample.device)
                wb = misread_scales(kind, sfb, pb, batch, sample.dtype, fill).to(sample.device)
            except (RuntimeError, ValueError, IndexError):
                break
            if fill == 0.0 and not (torch.isnan(wa_nan).any() or torch.isnan(wb_nan).any()):
                break                   # nothing out of bounds: the zero-fill variant is the same
            wa_nan, wb_nan = (wa, wb) if fill != 0.0 else (wa_nan, wb_nan)
            h_ab, h_a, h_b = sample.scaled(wa, wb), sample.scaled(wa, sample.sfb), sample.scaled(sample.sfa, wb)
            scored(f"{kind}", f"{text}, for both SFA and SFB{how}", h_ab)
            scored(f"{kind}_a", f"{text}, for SFA only{how}", h_a)
            scored(f"{kind}_b", f"{text}, for SFB only{how}", h_b)
            partial(kind, text, h_a, h_b, h_ab, how)
    _k_hypotheses(sample, scored)
    matches.sort(key=lambda x: (-(x.agree * min(1.0, x.known * 4)), -x.explained))
    return matches, notes


def _row_flags(yes: torch.Tensor, no: torch.Tensor, sampled: torch.Tensor) -> torch.Tensor:
    """Per sampled row: did the bug hit it (more of its elements fit the bug than the right result)? Rows
    where the bug changes nothing (a tie) follow the other rows of their 128-row tile."""
    yes, no = yes.cpu(), no.cpu()
    bug, decided = yes > no, yes != no
    tiles = sampled // ROWS_PER_TILE
    for t in torch.unique(tiles).tolist():
        here = tiles == t
        if bool(decided[here].any()) and bool(bug[here][decided[here]].all()):
            bug[here] = True
    return bug.to(sampled.device)


def _describe_rows(sampled: torch.Tensor, flags: torch.Tensor, size: int) -> str:
    """Which rows a partial bug hit, from flags on sampled rows: whole 128-row tiles when every sampled
    row of a tile agrees, else the sampled rows themselves."""
    tiles = sampled // ROWS_PER_TILE
    full = torch.zeros(size, dtype=torch.bool)
    mixed = False
    for t in torch.unique(tiles).tolist():
        f = flags[tiles == t]
        if bool(f.all()):
            full[t * ROWS_PER_TILE: (t + 1) * ROWS_PER_TILE] = True
        elif bool(f.any()):
            mixed = True
    if mixed:
        picked = torch.zeros(size, dtype=torch.bool)
        picked[sampled[flags]] = True
        return "the sampled " + (index_pattern(picked, "row") or "rows").removeprefix("only ")
    return (index_pattern(full, "row") or "no rows").removeprefix("only ")


def _k_hypotheses(sample: _Sample, scored):
    """K tiles missing, or only the last one kept (accumulator overwritten), and low-precision accumulation."""
    per_block = sample.per_block()                      # [J, R, C]
    chunk = 4 if sample.j % 4 == 0 else 1               # 64 K-elements per chunk
    parts = per_block.reshape(sample.j // chunk, chunk, *per_block.shape[1:]).sum(1)
    t = parts.shape[0]
    width = chunk * BLOCK_SIZE
    prefix = torch.cat((torch.zeros_like(parts[:1]), parts.cumsum(0)))
    total = prefix[-1]
    for w in (1, 2, 4, 8):
        if w >= t or t % w:
            continue
        for i in range(0, t, w):
            k0, k1 = i * width, (i + w) * width
            where = "the last" if i + w == t else ("the first" if i == 0 else "one")
            scored(f"k_missing_{k0}_{k1}", f"{where} K tile missing (K elements {k0}-{k1 - 1} never accumulated)",
                   total - (prefix[i + w] - prefix[i]))
        scored(f"only_last_{w * width}", f"only the last K tile of {w * width} accumulated (the accumulator "
               f"overwritten instead of added to, or reset each K tile)", total - prefix[t - w])
        scored(f"only_first_{w * width}", f"only the first K tile of {w * width} accumulated (the K loop stops "
               f"after one tile)", prefix[w])


def low_precision_check(data, output, expected, rtol=RTOL, atol=ATOL) -> tuple[str | None, list[str]]:
    """Compare the error with an emulated fp16 / bf16 accumulator: which one (if any) it resembles."""
    a, b, sfa, sfb, pa, pb, c = data
    m, n, l = c.shape
    out, exp = output.to(c.device), expected.to(c.device)
    if not torch.isfinite(out.double()).all():
        return None, []
    bad = mismatch_mask(out, exp, rtol, atol)
    if bad.float().mean() < 0.002:
        return None, []
    typical = float(exp.double().pow(2).mean().sqrt())
    if typical == 0 or float((out.double() - exp.double()).abs().max()) > 0.05 * typical:
        return None, []             # too large for rounding: something else is wrong
    batch = int(torch.argmax(bad.reshape(-1, l).sum(0)))
    generator = torch.Generator().manual_seed(1)
    limit = max(16, min(64, int(math.sqrt(SAMPLE_ELEMENTS / max(1, a.shape[1] * 2 // BLOCK_SIZE)))))
    rows = _pick(torch.zeros(m, dtype=torch.bool), limit, generator)
    cols = _pick(torch.zeros(n, dtype=torch.bool), limit, generator)
    sample = _Sample(data, batch, rows, cols)
    per_block = sample.per_block()
    chunk = 4 if sample.j % 4 == 0 else 1
    parts = per_block.reshape(sample.j // chunk, chunk, *per_block.shape[1:]).sum(1)
    o = out[:, :, batch][rows.to(out.device)][:, cols.to(out.device)].double()
    e = exp[:, :, batch][rows.to(exp.device)][:, cols.to(exp.device)].double()
    err = float((o - e).pow(2).mean().sqrt())
    if err == 0:
        return None, []
    lines, best = [], None
    for name, dtype in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
        acc = torch.zeros(parts.shape[1:], dtype=dtype, device=parts.device)
        for p in parts:
            acc = (acc.to(parts.dtype) + p).to(dtype)
        h = float((acc.to(torch.float16).double().cpu() - e.cpu()).pow(2).mean().sqrt())
        lines.append(f"RMS error {_fmt(err)}; an emulated {name} accumulator (64-element steps) gives {_fmt(h)}")
        if h > 0 and 1 / 3 <= err / h <= 3 and (best is None or abs(math.log(err / h)) < best[1]):
            best = (name, abs(math.log(err / h)))
    return (best[0] if best else None), lines


# ---- putting it together ---------------------------------------------------------------------------

ADVICE = {
    "transposed": "check the epilogue's row/column indexing (or which operand is M).",
    "nibble_swap": "element 0 of each byte is the LOW nibble: fix the unpacking of the operand that differs.",
    "scales_ignored": "the scale factors never reach the MMA/epilogue.",
    "sfa_ignored": "SFA never reaches the MMA/epilogue.",
    "sfb_ignored": "SFB never reaches the MMA/epilogue.",
    "scales_exchanged": "swap the scale pointers (sfa belongs to A's rows, sfb to B's).",
    "bf16_output": "round the fp32 accumulator straight to fp16.",
    "permuted_contiguous": "use the permuted tensor's data_ptr() as is; never call .contiguous() on it.",
    "plain_as_blocked": "pass sfa_permuted/sfb_permuted (blocked), not sfa/sfb, or index the plain layout.",
    "blocked_as_plain": "the permuted tensors hold the 128x4 blocked layout: byte "
                        "((r/128)*(K/64) + k/4)*512 + (r%32)*16 + ((r%128)/32)*4 + k%4.",
}
LAYOUT_ADVICE = ("the blocked byte for (row r, K-block k) is ((r/128)*(K/64) + k/4)*512 + (r%32)*16 + "
                 "((r%128)/32)*4 + k%4.")


def _advice(key: str) -> str:
    key = key.removesuffix("_partial")
    base = key[:-2] if key.endswith(("_a", "_b")) and key[:-2] in LAYOUT_BUGS else key
    if base in ADVICE:
        return ADVICE[base]
    if base in LAYOUT_BUGS:
        return LAYOUT_ADVICE
    if base.startswith("k_missing"):
        return "check the K loop bounds (and split-K reduction): that K range never reached the accumulator."
    if base.startswith("only_last"):
        return "accumulate across K tiles (don't overwrite or zero the accumulator per tile)."
    if base.startswith("only_first"):
        return "the K loop ends after its first tile: check its trip count."
    if base.startswith("batch_"):
        return "check the L (batch) offsets of the inputs and of c."
    return ""


@torch.no_grad()
def diagnose(data, output, expected, prefilled=None, rtol: float = RTOL, atol: float = ATOL,
             hypotheses: bool = True) -> Diagnosis | None:
    """Why `output` differs from `expected`, or None when it does not (or is not one comparable tensor)."""
    if not isinstance(output, torch.Tensor) or not isinstance(expected, torch.Tensor) \
            or tuple(output.shape) != tuple(expected.shape) or output.numel() == 0:
        return None
    an = anatomy(output, expected, prefilled, rtol, atol)
    if an.mismatches == 0:
        return None
    evidence = an.lines()
    frac = an.mismatches / an.elements
    if an.untouched_all:
        return Diagnosis("The output is exactly the pre-filled c: the kernel never wrote its result into the "
                         "tensor it returned (did it write to a copy, or return before the kernel ran?).",
                         evidence, "untouched")
    if an.all_zero:
        return Diagnosis("The output is all zeros: the result never reached the returned tensor, or the "
                         "accumulator was never loaded (zeros written by the epilogue).", evidence, "all_zero")
    if an.untouched and an.untouched >= 0.9 * an.mismatches:
        where = _where(an)
        return Diagnosis(f"{an.untouched} output elements ({where}) still hold the pre-filled c: those tiles were "
                         "never written; check the grid size and the handling of the last (partial) tiles.",
                         evidence, "unwritten_tiles")
    if hypotheses and is_gemm_contract(data, output):
        try:
            matches, notes = gemm_hypotheses(data, output, expected, rtol, atol)
        except (RuntimeError, ValueError, IndexError, TypeError) as error:
            matches, notes = [], [f"hypotheses not computed: {type(error).__name__}: {str(error).splitlines()[0]}"]
        found = _judge(matches, an)
        evidence += notes
        if found is not None:
            summary, key, shown = found
            evidence += ["best hypotheses: " + m.line() for m in shown]
            return Diagnosis(summary, evidence, key)
        evidence += ["best hypotheses (none fits): " + m.line() for m in matches[:3]]
        if an.nan == an.posinf == an.neginf == 0 and frac > 0.002:
            precision, lines = low_precision_check(data, output, expected, rtol, atol)
            evidence += lines
            if precision:
                article = "an" if precision == "fp16" else "a"
                return Diagnosis(f"The errors are small (max abs {_fmt(an.max_abs)}) and spread over the whole output, "
                                 f"the size {article} {precision} accumulator gives: accumulate in fp32 and round to "
                                 "fp16 once.",
                                 evidence, f"low_precision_{precision}")
    if an.nan + an.posinf + an.neginf > an.expected_nonfinite:
        where = _where(an)
        return Diagnosis(f"The output holds {an.nan} NaN and {an.posinf + an.neginf} Inf values ({where}), which the "
                         "reference does not: usually a scale or operand read outside its buffer or from "
                         "uninitialised shared/tensor memory.", evidence, "nonfinite")
    where = _where(an)
    if not (hypotheses and is_gemm_contract(data, output)):
        evidence.append("(bug hypotheses and probes exist for the nvfp4_gemm contract only)")
        return Diagnosis(f"{an.mismatches} of {an.elements} elements are wrong ({where}; max abs error "
                         f"{_fmt(an.max_abs)}).", evidence, None)
    return Diagnosis(f"{an.mismatches} of {an.elements} elements are wrong ({where}; max abs error "
                     f"{_fmt(an.max_abs)}); no classic bug explains it.", evidence, None)


def _where(an: Anatomy) -> str:
    rows = None if an.row_pattern in (None, "every row") else an.row_pattern.removeprefix("only ")
    cols = None if an.col_pattern in (None, "every column") else an.col_pattern.removeprefix("only ")
    if rows and cols:
        return f"in {rows}; {cols}"
    if rows or cols:
        return f"in {rows or cols}"
    return "everywhere"


def _judge(matches: list[Match], an: Anatomy):
    """(summary, key, matches shown) for the best-fitting hypothesis, or None."""
    usable = [m for m in matches if m.wrong_known >= 8 and m.known >= 0.2]
    if not usable:
        return None
    exact = [m for m in usable if m.agree >= EXACT and m.explained >= 0.99]
    if exact:
        best = exact[0]
        same = [m.key for m in exact[1:] if m.agree >= best.agree - 1e-9 and m.note != "partial"][:3]
        also = f" (indistinguishable here from: {', '.join(same)})" if same else ""
        oob = "" if best.known >= 0.999 else \
            f" on every element it predicts ({100 * best.known:.0f}%; the rest read scales from outside the buffer)"
        return (f"The output matches a kernel with {best.text}{oob}{also}. Fix: {_advice(best.key)}",
                best.key, exact[:3])
    partial = [m for m in usable if m.explained >= 0.98 and m.wrong_known >= 64]
    if partial:
        best = max(partial, key=lambda m: (m.explained, m.agree))
        return (f"The wrong elements ({_where(an)}) are exactly what a kernel with {best.text} produces, and the "
                f"rest is right: the bug hits only part of the output. Fix: {_advice(best.key)}", best.key, [best])
    near = [m for m in usable if m.agree >= NEAR and m.explained >= NEAR]
    if near:
        best = near[0]
        return (f"The output nearly matches ({100 * best.agree:.1f}% of elements) a kernel with {best.text}. "
                f"Fix: {_advice(best.key)}", best.key, near[:3])
    return None


def _expected_from(reference, data, fresh):
    """The reference output for `data` (recomputed on a clone of the pristine inputs when we have them)."""
    from arena.nested import clone_data
    if fresh is not None and is_gemm_contract(data) and isinstance(fresh[6], torch.Tensor) \
            and not torch.equal(data[6], fresh[6]):
        return data[6]          # the reference wrote its result into the parent's c during the check
    return reference.ref_kernel(clone_data(fresh if fresh is not None else data))


def _same_tensor(x, y) -> bool:
    if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor):
        return True
    if x.dtype != y.dtype or x.shape != y.shape:
        return False
    if x.element_size() == 1:
        return torch.equal(x.view(torch.uint8), y.view(torch.uint8))
    return torch.equal(x, y)


def explain_failure(reference, data, output, regenerate=None, rtol: float = RTOL, atol: float = ATOL,
                    ) -> Diagnosis | None:
    """The hook for a failed check: never raises; a failure of the diagnostics becomes one line."""
    started = time.perf_counter()
    try:
        if not isinstance(output, torch.Tensor):
            return None
        fresh = None
        if regenerate is not None:
            fresh = regenerate()
            same = isinstance(fresh, (tuple, list)) and len(fresh) == len(data) and all(
                _same_tensor(x, y) for x, y in zip(fresh[:-1], data[:-1]))
            fresh = fresh if same else None
        expected = _expected_from(reference, data, fresh)
        if not isinstance(expected, torch.Tensor) or expected.shape != output.shape:
            return None
        prefilled = fresh[-1] if fresh is not None and isinstance(fresh[-1], torch.Tensor) else None
        found = diagnose(data, output, expected, prefilled, rtol, atol)
        if found is not None:
            found.evidence.append(f"(diagnosis took {time.perf_counter() - started:.1f} s)")
        return found
    except Exception as error:      # the diagnosis must never cost the user their results
        return Diagnosis(f"(no diagnosis: the diagnostics failed: {type(error).__name__}: "
                         f"{str(error).splitlines()[0] if str(error) else ''})", [], None)


# ---- probes: structured inputs through the real worker ------------------------------------------------

DEFAULT_PROBE_CASE = {"m": 256, "n": 256, "k": 512, "l": 1, "seed": 1111}
PROBE_SCALE = 16.0           # one K-block of ones contributes 16 x its scale


class ProbeFailure(RuntimeError):
    """The submission failed on a probe input (raised, crashed, hung); str() is one line."""


def _probe_table() -> torch.Tensor:
    """250 distinct e4m3 values (every finite nonzero code but ±1.0, both signs) as bytes."""
    codes = [c for c in range(256) if c & 0x7F not in (0, 0x7F, 0x38)]      # 0x38 = 1.0, the neutral scale
    return torch.tensor(codes, dtype=torch.uint8)


def gemm_probe_input(a_codes, b_codes, sfa_values, sfb_values, device, pad_a: float = 1.0, pad_b: float = 1.0,
                     seed: int = 0):
    """The competition's 7-tuple from codes [L, MN, K] (uint8 0..15) and scale values [L, MN, K/16]
    (float32 holding exact e4m3 values): official dtypes and strides, permuted scales through to_permuted
    with `pad_*` in the padding, and a random pre-filled c."""
    def fp4(codes):             # bytes moved as uint8, viewed as fp4 on the device (official strides)
        pairs = codes.to(torch.uint8).reshape(*codes.shape[:-1], -1, 2)
        raw = (pairs[..., 0] | (pairs[..., 1] << 4)).contiguous()
        return raw.to(device).permute(1, 2, 0).view(torch.float4_e2m1fn_x2)

    def scales(values, pad):
        raw = values.to(torch.float8_e4m3fn).contiguous().view(torch.uint8).to(device)
        plain = raw.view(torch.float8_e4m3fn).permute(1, 2, 0)
        mn, sk, l = plain.shape
        padding = torch.full((l, ceil_div(mn, ROWS_PER_TILE), ceil_div(sk, COLS_PER_TILE), 32, 4, 4), pad,
                             device=device).to(torch.float8_e4m3fn)
        return plain, to_permuted(plain, padding)

    l, m = a_codes.shape[0], a_codes.shape[1]
    n = b_codes.shape[1]
    sfa, sfa_perm = scales(sfa_values, pad_a)
    sfb, sfb_perm = scales(sfb_values, pad_b)
    generator = torch.Generator().manual_seed(seed)
    c = torch.randn((l, m, n), generator=generator).to(torch.float16).to(device).permute(1, 2, 0)
    return fp4(a_codes), fp4(b_codes), sfa, sfb, sfa_perm, sfb_perm, c


@dataclass
class ProbeResult:
    name: str
    ok: bool
    headline: str
    lines: list = field(default_factory=list)


def probe_ones(call, m, n, k, l, device) -> ProbeResult:
    """All fp4 values 1.0, all scales 1: every output must equal K."""
    codes_a = torch.full((l, m, k), 2, dtype=torch.uint8)
    codes_b = torch.full((l, n, k), 2, dtype=torch.uint8)
    data = gemm_probe_input(codes_a, codes_b, torch.ones(l, m, k // BLOCK_SIZE), torch.ones(l, n, k // BLOCK_SIZE),
                            device)
    name = f"all ones (every output must be K = {k})"
    try:
        out = call(data)
    except ProbeFailure as failure:
        return ProbeResult(name, False, f"the submission failed: {failure}")
    expected = torch.full((m, n, l), float(k), dtype=torch.float16, device=out.device)
    an = anatomy(out, expected, data[6])
    if an.mismatches == 0:
        return ProbeResult(name, True, "every output is K")
    values = torch.unique(out.double().flatten().cpu(), return_counts=True)
    common = sorted(zip(values[1].tolist(), values[0].tolist()), reverse=True)[:4]
    seen = ", ".join(f"{_fmt(v)} x{c}" for c, v in common)
    return ProbeResult(name, False, f"{an.mismatches} of {an.elements} outputs are not K (most common values: {seen})",
                       an.lines())


def probe_nibbles(call, m, n, k, l, device) -> ProbeResult:
    """A bytes 0x21 (0.5, 1.0), B bytes 0x02 (1.0, 0): K/4 when the low nibble is element 0 in both operands
    (or, invisibly, in neither); K/2 when exactly one operand takes the high nibble first."""
    codes_a = torch.tensor([1, 2], dtype=torch.uint8).repeat(l, m, k // 2)
    codes_b = torch.tensor([2, 0], dtype=torch.uint8).repeat(l, n, k // 2)
    data = gemm_probe_input(codes_a, codes_b, torch.ones(l, m, k // BLOCK_SIZE), torch.ones(l, n, k // BLOCK_SIZE),
                            device)
    name = f"nibble order (A = 0.5,1.0 per byte, B = 1.0,0: outputs must be K/4 = {k // 4})"
    try:
        out = call(data)
    except ProbeFailure as failure:
        return ProbeResult(name, False, f"the submission failed: {failure}")
    o = out.double()
    if bool((o == k / 4).all()):
        return ProbeResult(name, True, "element 0 is the low nibble (or both operands agree, which a GEMM cannot see)")
    if bool((o == k / 2).all()):
        return ProbeResult(name, False, f"every output is K/2 = {k // 2}: exactly one operand takes the HIGH nibble "
                           "as element 0 (a GEMM cannot tell which)")
    frac = float((o == k / 4).float().mean())
    return ProbeResult(name, False, f"{100 * (1 - frac):.1f}% of outputs are not K/4 (see the all-ones probe first)")


def probe_scale_map(call, operand: str, m, n, k, l, device) -> ProbeResult:
    """Which stored scale byte the kernel applied at each (row, K-block) of SFA (or SFB).

    For SFA: A is all ones, B's row c holds ones only in K-block c % J, SFB is 1, so out[r, c] = 16 x (the
    SFA value applied at row r, K-block c). SFA holds coded values, twice: once coding the row inside its
    128-row tile, once coding (row tile, K-block); decoding both gives the stored position the kernel read.
    SFB is the mirror image. The padding of the probed permuted tensor is 0 (never a code).
    """
    j_blocks = k // BLOCK_SIZE
    own, other = (m, n) if operand == "A" else (n, m)
    seen_blocks = min(other, j_blocks)
    table = _probe_table()
    values = decode_e4m3(table, torch.float32)
    rb = torch.arange(own).unsqueeze(1) // ROWS_PER_TILE
    rows = (torch.arange(own) % ROWS_PER_TILE).unsqueeze(1).expand(own, j_blocks)
    tiles = rb * j_blocks + torch.arange(j_blocks).unsqueeze(0)
    wraps = int(tiles.max()) >= len(table)
    name = f"SF{operand} map (which stored scale each row and K-block of {'A' if operand == 'A' else 'B'} received)"
    applied_codes, applied_ones = [], []
    ones_codes = torch.full((l, other, k), 0, dtype=torch.uint8)
    one_hot = (torch.arange(k) // BLOCK_SIZE).unsqueeze(0) == (torch.arange(other) % j_blocks).unsqueeze(1)
    ones_codes[:, one_hot] = 2
    full_ones = torch.full((l, own, k), 2, dtype=torch.uint8)
    plain_sets = []
    for coding in (rows, tiles % len(table)):
        coded = values[coding].unsqueeze(0).expand(l, own, j_blocks)
        ones = torch.ones(l, other, j_blocks)
        if operand == "A":
            data = gemm_probe_input(full_ones, ones_codes, coded, ones, device, pad_a=0.0)
        else:
            data = gemm_probe_input(ones_codes, full_ones, ones, coded, device, pad_b=0.0)
        plain_sets.append(data)
        try:
            out = call(data)
        except ProbeFailure as failure:
            return ProbeResult(name, False, f"the submission failed: {failure}")
        o = out[:, :, 0].double().cpu()
        o = o[:, :seen_blocks] if operand == "A" else o[:seen_blocks, :].T       # [own, seen blocks]
        applied_codes.append(_decode_probe(o / PROBE_SCALE, values))
        applied_ones.append(bool((o == PROBE_SCALE).all()))
    one_hot_ok, one_hot_line = probe_one_hot(call, operand, m, n, k, l, device)
    row_code, tile_code = applied_codes
    known = (row_code >= 0) & (tile_code >= 0)
    got_row = torch.where(known, (tile_code // j_blocks) * ROWS_PER_TILE + row_code, torch.full_like(row_code, -1))
    got_block = torch.where(known, tile_code % j_blocks, torch.full_like(tile_code, -1))
    want_row = torch.arange(own).unsqueeze(1).expand(own, seen_blocks)
    want_block = torch.arange(seen_blocks).unsqueeze(0).expand(own, seen_blocks)
    right = (got_row == want_row) & (got_block == want_block)
    total = right.numel()
    lines = [f"probed {own} rows x {seen_blocks} of {j_blocks} K-blocks" + (" (coded positions wrap: ambiguous)"
                                                                              if wraps else "")]
    lines.append(one_hot_line)
    if bool(right.all()) and one_hot_ok:
        return ProbeResult(name, True, f"all {total} (row, K-block) positions received their own scale", lines)
    if bool(right.all()):
        return ProbeResult(name, False, f"all {total} (row, K-block) positions received their own scale, but the "
                           "one-hot probe disagrees (see below)", lines)
    ones_applied = all(applied_ones)
    lines += _map_table(want_row, want_block, got_row, got_block, right)
    matched = []
    for kind, (text, _) in LAYOUT_BUGS.items():
        for fill in (0.0,):
            ok = True
            for data, got in zip(plain_sets, applied_codes):
                plain, perm = (data[2], data[4]) if operand == "A" else (data[3], data[5])
                plain8, perm8 = plain.view(torch.uint8).cpu(), perm.view(torch.uint8).cpu()
                predicted = misread_scales(kind, plain8.view(torch.float8_e4m3fn), perm8.view(torch.float8_e4m3fn),
                                           0, torch.float64, fill)[:, :seen_blocks]
                predicted_code = _decode_probe(predicted, values)
                if not torch.equal(predicted_code, got):
                    ok = False
                    break
            if ok:
                matched.append((kind, text))
    headline = f"{int(right.sum())} of {total} (row, K-block) positions received their own scale"
    if ones_applied:
        headline += f"; every position received 1.0: SF{operand} is not applied (ignored, or SFA/SFB exchanged)"
    elif matched:
        headline += f"; the mapping is exactly that of {matched[0][1]}"
        lines.append("layout bugs with exactly this mapping: " + ", ".join(k for k, _ in matched))
    elif int((~known).sum()):
        lines.append(f"{int((~known).sum())} positions received a value that is no stored scale (0 = padding or "
                     "zero-filled out-of-bounds read, or the value never reached the product)")
    return ProbeResult(name, False, headline, lines)


def probe_one_hot(call, operand: str, m, n, k, l, device) -> tuple[bool | None, str]:
    """One scale byte set to 2, every other scale and value 1: which output rows/columns did it reach?

    For SFA (row r0, K-block j0) the right answer is row r0, every column, each raised by 16.
    Returns (as expected, one line); None when the submission failed on it.
    """
    j_blocks = k // BLOCK_SIZE
    own = m if operand == "A" else n
    r0, j0 = min(33, own - 1), min(5, j_blocks - 1)
    hot = torch.ones(l, own, j_blocks)
    hot[:, r0, j0] = 2.0
    ones_a, ones_b = torch.full((l, m, k), 2, dtype=torch.uint8), torch.full((l, n, k), 2, dtype=torch.uint8)
    plain_a = hot if operand == "A" else torch.ones(l, m, j_blocks)
    plain_b = hot if operand == "B" else torch.ones(l, n, j_blocks)
    try:
        out = call(gemm_probe_input(ones_a, ones_b, plain_a, plain_b, device))
    except ProbeFailure as failure:
        return None, f"one-hot SF{operand} probe: the submission failed: {failure}"
    o = out[:, :, 0].double().cpu()
    changed = o != k
    if operand == "B":
        changed, o = changed.T, o.T
    rows = torch.nonzero(changed.any(1)).flatten().tolist()
    cols = torch.nonzero(changed.any(0)).flatten().tolist()
    other = "column" if operand == "A" else "row"
    mine = "row" if operand == "A" else "column"
    right = rows == [r0] and len(cols) == changed.shape[1] and bool((o[r0] == k + PROBE_SCALE).all())
    where = ", ".join(str(r) for r in rows[:8]) + (f" and {len(rows) - 8} more" if len(rows) > 8 else "")
    reach = "every" if len(cols) == changed.shape[1] else f"{len(cols)} of {changed.shape[1]}"
    text = (f"one-hot: SF{operand}[{mine} {r0}, K-block {j0}] = 2 (all else 1) changed output {mine}s "
            f"[{where or 'none'}] in {reach} {other}s; expected {mine} {r0} only, in every {other}, by +16")
    return right, text


def _decode_probe(scale_values: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """Index of each value in the probe table, -1 when it is not a table value."""
    v = scale_values.double()
    hit = v.unsqueeze(-1) == values.double().view(*([1] * v.dim()), -1)
    found = hit.any(-1)
    return torch.where(found, hit.float().argmax(-1), torch.full(v.shape, -1, dtype=torch.long))


def _map_table(want_row, want_block, got_row, got_block, right, limit: int = 10) -> list[str]:
    """A few (row, K-block) positions: the stored scale expected there beside the one the kernel applied."""
    wrong = torch.nonzero(~right)[: limit - 3].tolist()
    good = torch.nonzero(right)[:3].tolist()
    picks = sorted(set(map(tuple, wrong + good)))[:limit]
    lines = ["  row  K-block   expected scale of (row, K-block)   kernel applied scale of"]
    for r, j in picks:
        gr, gj = int(got_row[r, j]), int(got_block[r, j])
        got = f"({gr}, {gj})" if gr >= 0 else "(no stored scale)"
        want = f"({int(want_row[r, j])}, {int(want_block[r, j])})"
        mark = "ok" if right[r, j] else "WRONG"
        lines.append(f"  {r:>4} {j:>7}   {want:<33}{got:<24}{mark}")
    return lines


def probe_random(call, reference, args: dict, regenerate) -> ProbeResult:
    """The case itself, with the official random data: checked, and diagnosed when wrong."""
    from arena.nested import clone_data
    name = "random case (" + "; ".join(f"{k}: {v}" for k, v in args.items()) + ")"
    data = regenerate()
    try:
        out = call(clone_data(data))
    except ProbeFailure as failure:
        return ProbeResult(name, False, f"the submission failed: {failure}")
    good, message = reference.check_implementation(data, out)
    if good:
        return ProbeResult(name, True, "matches the reference")
    found = explain_failure(reference, data, out, regenerate)
    headline = " ".join(str(message).split())[:200]
    if found is None:
        return ProbeResult(name, False, headline)
    return ProbeResult(name, False, headline, [f"diagnosis: {found.summary}"] + found.evidence)


def run_probes(call, reference, args: dict, device: str) -> list[ProbeResult]:
    """Every probe for one case shape; GEMM probes only for the nvfp4_gemm contract."""
    regenerate = lambda: reference.generate_input(**args)     # noqa: E731
    sample = regenerate()
    results = []
    if is_gemm_contract(sample) and all(key in args for key in ("m", "n", "k", "l")):
        m, n, k, l = args["m"], args["n"], args["k"], args["l"]
        results.append(probe_ones(call, m, n, k, l, device))
        results.append(probe_nibbles(call, m, n, k, l, device))
        results.append(probe_scale_map(call, "A", m, n, k, l, device))
        results.append(probe_scale_map(call, "B", m, n, k, l, device))
    results.append(probe_random(call, reference, args, regenerate))
    return results


def render_probes(console, spec: str, results: list[ProbeResult], not_gemm: bool = False):
    console.print(f"[bold]diagnose[/bold] {spec}")
    if not_gemm:
        console.print("[dim]structured probes exist for the nvfp4_gemm contract only; this task gets the random "
                      "case with the anatomy of its output[/dim]")
    for r in results:
        mark = "[green]✔[/green]" if r.ok else "[red]✘[/red]"
        console.print(f"{mark} [bold]{r.name}[/bold]: ", end="")
        console.print(r.headline, markup=False, highlight=False)
        for line in r.lines:
            console.print(f"    {line}", markup=False, highlight=False)
    passed = sum(r.ok for r in results)
    colour = "green" if passed == len(results) else "red"
    console.print(f"[{colour}]{passed} of {len(results)} probes passed[/{colour}]")


def diagnose_case(evaluator, index: int, case):
    """`eval.py diagnose`: every probe for one case through the evaluator's worker.

    Returns (CaseResult, [probe dicts]); the CaseResult passes when every probe does, and carries the
    first failing probe's headline as its diagnosis and every probe line as evidence.
    """
    from arena.results import CaseResult
    from arena.runner import WorkerFailure

    def call(data):
        try:
            return evaluator.call_once(data)
        except WorkerFailure as failure:
            raise ProbeFailure(str(failure)) from None

    result = CaseResult(index=index, spec=case.spec, passed=False)
    try:
        probes = run_probes(call, evaluator.reference, dict(case.args), evaluator.device)
    except Exception as error:          # a probe the task's generator cannot make: one line, not a traceback
        result.error = f"the probes could not run: {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        return result, []
    result.passed = all(p.ok for p in probes)
    failing = [p for p in probes if not p.ok]
    if failing:
        result.error = f"{len(failing)} of {len(probes)} probes failed"
        result.diagnosis = f"{failing[0].name}: {failing[0].headline}"
    for p in probes:
        result.evidence += [f"{'ok' if p.ok else 'FAILED'} {p.name}: {p.headline}"] + [f"  {x}" for x in p.lines]
    return result, [dict(p.__dict__) for p in probes]


def render_report(console, results, reports):
    """The terminal report of `eval.py diagnose` (one block of probes per case)."""
    for r in results:
        probes = [ProbeResult(**p) for p in (reports or {}).get(r.index, [])]
        if not probes:
            console.print(f"[red]✘ {r.spec}: {r.error}[/red]")
            continue
        render_probes(console, r.spec, probes, not_gemm=len(probes) == 1)
