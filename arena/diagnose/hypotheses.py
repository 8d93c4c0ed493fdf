"""The nvfp4_gemm contract's classic bugs: the output compared with references computed under each (one
operand's nibbles swapped, scales ignored or exchanged, the blocked scale layout misread, a K tile missing,
output transposed or in the wrong batch, low-precision accumulation), on a sample of rows and columns.

A nibble swap in BOTH operands is invisible in a GEMM (the same permutation inside every 16-block), and a
swap in A alone gives exactly the same output as a swap in B alone, so the diagnosis names "one operand"."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from arena.taskdef.checking import mismatch_mask
from arena.nvfp4.formats import BLOCK_SIZE, E2M1_VALUES, as_bytes, decode_e4m3, unpack_codes
from arena.nvfp4.layouts import COLS_PER_TILE, ROWS_PER_TILE, TILE_BYTES, ceil_div
from arena.diagnose.common import ATOL, RTOL, SAMPLE_ELEMENTS, fmt, index_pattern, work_dtype
from arena.diagnose.readers import all_readers, distinct_readers

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
    "to_blocked_no_transpose": ("scales re-blocked by a to_blocked without its .transpose(1, 2): row r of each "
                                "128-row block received row 4·(r % 32) + r / 32's scale (the 32-row and 4-row "
                                "roles of the 128x4 atom exchanged where the blocked scales are written)",
                                lambda rb, rr, r4, r32, cb, c4, RB, CB, SK, r, j:
                                (rb * CB + cb) * TILE_BYTES + ((4 * r32 + r4) % 32) * 16
                                + ((4 * r32 + r4) // 32) * 4 + c4),
    # The stride between 128-row blocks taken from a wrong count: row block 0 reads right, every later one
    # reads other tiles, or past the buffer (the NaN/Inf of a TMA load beyond the scales).
    **{f"rowblock_stride_{name}": (f"the stride between 128-row blocks of the blocked scales taken as {words} "
                                   f"instead of ceil(K/64) tiles of 512 bytes: row block 0 reads its scales "
                                   f"right, every later one reads another block's tiles or past the buffer",
                                   lambda rb, rr, r4, r32, cb, c4, RB, CB, SK, r, j, f=stride:
                                   (rb * f(CB, SK) + cb) * TILE_BYTES + r32 * 16 + r4 * 4 + c4)
       for name, words, stride in (
           ("zero", "0 (the row-block index dropped from the offset: every block reads the first block's)",
            lambda CB, SK: 0),
           ("scales", "the count of scales per row (K/16, a tile per scale)", lambda CB, SK: 4 * CB),
           ("double", "twice the K tiles (a count padded or doubled)", lambda CB, SK: 2 * CB),
           ("plus_one", "one tile more than the K tiles (a count padded by one)", lambda CB, SK: CB + 1),
           ("pad4", "the K tiles rounded up to a multiple of 4 (a padded count)", lambda CB, SK: -(-CB // 4) * 4),
           ("pad8", "the K tiles rounded up to a multiple of 8 (a padded count)", lambda CB, SK: -(-CB // 8) * 8))},
    "inner_transposed": ("the 4-row-group and K-position indices swapped inside each 16-byte scale row",
                         lambda rb, rr, r4, r32, cb, c4, RB, CB, SK, r, j:
                         (rb * CB + cb) * TILE_BYTES + r32 * 16 + c4 * 4 + r4),
    "kgroup_swapped": ("the K tile (group of 4 scales) and the position inside the group swapped",
                       lambda rb, rr, r4, r32, cb, c4, RB, CB, SK, r, j:
                       (rb * CB + c4) * TILE_BYTES + r32 * 16 + r4 * 4 + cb),
    "k_atom_stride_zero": ("the 4 K-blocks of each 128x4 scale atom all read the first one's scale: a stride of "
                           "0 on the atom's K mode, where CUTLASS's atom has K as (16, 4):(0, 1) (the 0 is for the "
                           "16 elements that share a scale, the 1 for the 4 scales side by side)",
                           lambda rb, rr, r4, r32, cb, c4, RB, CB, SK, r, j:
                           (rb * CB + cb) * TILE_BYTES + r32 * 16 + r4 * 4),
    "ktile_stride": ("a wrong stride between K tiles (4 tiles of 512 bytes per K tile instead of 1)",
                     lambda rb, rr, r4, r32, cb, c4, RB, CB, SK, r, j:
                     (rb * CB + 4 * cb) * TILE_BYTES + r32 * 16 + r4 * 4 + c4),
    "tile_order": ("the 512-byte scale tiles walked K-tile-major (row tiles inner) instead of row-tile-major",
                   lambda rb, rr, r4, r32, cb, c4, RB, CB, SK, r, j:
                   (cb * RB + rb) * TILE_BYTES + r32 * 16 + r4 * 4 + c4),
    **{f"sbo_{sbo}": (f"the 8-row groups of each 512-byte scale atom read {sbo} bytes apart instead of 128 (a "
                      f"tcgen05.cp scale-copy descriptor with SBO = {sbo}: row 8·i+j received row "
                      f"{'j' if sbo == 0 else 'i+j' if sbo == 16 else f'{sbo // 16}·i+j'}'s scale)",
                      lambda rb, rr, r4, r32, cb, c4, RB, CB, SK, r, j, s=sbo:
                      (rb * CB + cb) * TILE_BYTES + (r32 // 8) * s + (r32 % 8) * 16 + r4 * 4 + c4)
       for sbo in (0, 16, 32, 64)},
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
        # In words: the key is the JSON's and the code's name, never a user's
        return f"{self.text}: agrees on {100 * self.agree:.1f}%, reproduces {100 * self.explained:.1f}% " \
               f"of the wrong elements{k}"


class _Sample:
    """One batch of a gemm case restricted to sampled rows/cols, with per-16-block partial products."""

    def __init__(self, data, batch: int, rows: torch.Tensor, cols: torch.Tensor):
        a, b, sfa, sfb, pa, pb, c = data
        self.data, self.batch, self.rows, self.cols = data, batch, rows, cols
        self.device = c.device
        self.dtype = work_dtype(self.device)
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
        return scaled_blocks(self.blocks if blocks is None else blocks,
                             sa_full[self.rows.to(sa_full.device)].to(self.device, self.dtype),
                             sb_full[self.cols.to(sb_full.device)].to(self.device, self.dtype))


    def per_block(self) -> torch.Tensor:
        sa = self.sfa[self.rows.to(self.sfa.device)].to(self.device)
        sb = self.sfb[self.cols.to(self.sfb.device)].to(self.device)
        return self.blocks * sa.T.unsqueeze(2) * sb.T.unsqueeze(1)


def scaled_blocks(blocks: torch.Tensor, sa: torch.Tensor, sb: torch.Tensor) -> torch.Tensor:
    """sum_j sa[r, j] sb[c, j] blocks[j, r, c], with sa [R, J] and sb [C, J] the scales of those rows."""
    weighted = blocks * sa.T.unsqueeze(2)           # elementwise beats einsum here (2-7x on the CPU)
    weighted.mul_(sb.T.unsqueeze(1))
    return weighted.sum(0)


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
        wa_nan = wb_nan = None          # the NaN-filled reading, set by the first pass, tested by the second
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
    _generated_layouts(sample, pa, pb, o, wrong, scored, rtol, atol)
    matches.sort(key=lambda x: (-(x.agree * min(1.0, x.known * 4)), -x.explained))
    return matches, notes


SCREEN = 32          # sampled rows and columns every generated layout reader is screened on
FULLY_SCORED = 4     # how many of the best screened readers are then scored on the whole sample
# The hand-listed bugs that read the blocked buffer at their own offsets (the others read another buffer)
BLOCKED_READERS = ("correct",) + tuple(kind for kind, (_, offsets) in LAYOUT_BUGS.items() if offsets is not None)


def _generated_layouts(sample: _Sample, pa, pb, o, wrong, scored, rtol, atol):
    """Every generated misreading of the blocked scale layout (arena/diagnose/readers.py) that reads
    differently from the correct layout and the hand-listed bugs: screened on a corner of the sample (the
    rows and columns with the most wrong elements), the best scored like the others, for SFA and SFB
    together and each alone."""
    rows_a, rows_b = sample.rows.to(sample.device), sample.cols.to(sample.device)
    known = [(_blocked_offsets(sample.m, sample.j, sample.device, kind)[rows_a],
              _blocked_offsets(sample.n, sample.j, sample.device, kind)[rows_b]) for kind in BLOCKED_READERS]
    candidates = distinct_readers(all_readers(), rows_a, rows_b, ((sample.m, sample.j), (sample.n, sample.j)), known)
    buf_a, buf_b = _batch_blocked_bytes(pa, sample.batch), _batch_blocked_bytes(pb, sample.batch)
    sa, sb = sample.sfa[rows_a.to(sample.sfa.device)], sample.sfb[rows_b.to(sample.sfb.device)]
    ri = torch.argsort(wrong.sum(1), descending=True, stable=True)[:SCREEN].to(sample.device)
    ci = torch.argsort(wrong.sum(0), descending=True, stable=True)[:SCREEN].to(sample.device)
    blocks = sample.blocks[:, ri][:, :, ci]
    o_s = o[ri.to(o.device)][:, ci.to(o.device)]

    def agree(h):
        known_here = ~torch.isnan(h)
        ok = ~mismatch_mask(o_s, h.to(o_s.dtype), rtol, atol) & known_here
        return float(ok.sum()) / max(1, int(known_here.sum())) * min(1.0, 4 * float(known_here.float().mean()))

    screened = []
    for reader, off_a, off_b in candidates:
        wa = _gather(buf_a, off_a[ri], sample.dtype).to(sample.device)
        wb = _gather(buf_b, off_b[ci], sample.dtype).to(sample.device)
        for which, (xa, xb) in (("", (wa, wb)), ("_a", (wa, sb[ci])), ("_b", (sa[ri], wb))):
            screened.append((agree(scaled_blocks(blocks, xa, xb)), reader, which, off_a, off_b))
    screened.sort(key=lambda x: -x[0])
    for _, reader, which, off_a, off_b in screened[:FULLY_SCORED]:
        for fill, how in ((float("nan"), ""), (0.0, " (reads past the end of the scale buffer returning zeros, "
                                                     "as a TMA load does)")):
            wa = _gather(buf_a, off_a, sample.dtype, fill).to(sample.device) if which != "_b" else sa
            wb = _gather(buf_b, off_b, sample.dtype, fill).to(sample.device) if which != "_a" else sb
            scored(reader.key + which + ("_zero_fill" if fill == 0.0 else ""),
                   reader.text + {"": ", for both SFA and SFB", "_a": ", for SFA only", "_b": ", for SFB only"}[which]
                   + how, scaled_blocks(sample.blocks, wa, wb))
            outside = (which != "_b" and bool((off_a >= buf_a.numel()).any())) or \
                (which != "_a" and bool((off_b >= buf_b.numel()).any()))
            if not outside:
                break                   # nothing out of bounds: the zero-fill variant is the same


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
        lines.append(f"RMS error {fmt(err)}; an emulated {name} accumulator (64-element steps) gives {fmt(h)}")
        if h > 0 and 1 / 3 <= err / h <= 3 and (best is None or abs(math.log(err / h)) < best[1]):
            best = (name, abs(math.log(err / h)))
    return (best[0] if best else None), lines
