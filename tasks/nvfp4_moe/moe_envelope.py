"""nvfp4_moe's check: every output element must lie in the precision envelope of at least one documented
precision profile (docs/tasks.md, "nvfp4_moe: the precision envelope").

A profile names the dtype each intermediate is stored in: the L1 GEMM output h, the SiLU·up output act,
each expert's L2 output y, and the combine (fp32, or vLLM's bf16 weight × bf16 y). For each profile this
module computes the output such a kernel produces (the roundings themselves are deterministic) and the
band around it that only arithmetic noise can reach: fp32 accumulation order, fast exp and reciprocals,
and the NVFP4 requantizations (stages 1 and 4), which may land on the neighbouring e2m1 value or block scale
only where that noise straddles a decision boundary. Exact ties (a power-of-two scale and a value on a
midpoint) have no band: the contract rounds them to even. The final bf16 rounding may go to either
neighbour of the band's ends.

Used by reference.py (`check_implementation`); per expert with tokens it costs one L1 GEMM with its band, and for
each of the 9 (h, act) dtype pairs the requantization and one L2 GEMM with its band (2 + 2 × 9 GEMM-sized
products). The element-wise stages run once over every expert's rows and all nine pairs.
"""
import torch

from arena.nvfp4.formats import BLOCK_SIZE, E2M1_MAX, E4M3_MAX, dequantize

NOISE = 2.0 ** -20          # relative noise of fp32 sums in any order, fast exp, reciprocal-multiply
SCALE_NOISE = 2.0 ** -21    # relative noise of a kernel's own quantization arithmetic (amax/6/gs, x/scale)
INTERMEDIATE = (torch.float32, torch.bfloat16, torch.float16)        # h and act, each independently
# (expert output y, each weighted term, the router weight, the accumulator): fp32 throughout; y stored in bf16
# or fp16 then weighted in fp32; vLLM's bf16 weight × bf16 y stored in bf16; vLLM/SGLang fused_moe's
# MUL_ROUTED_WEIGHT, the fp32 y × fp32 weight stored once in bf16, summed in fp32; TensorRT-LLM's fused
# finalize, the same terms added atomically into a bf16 output (every partial sum rounded to bf16, in any
# order).
FINISH = ((torch.float32, torch.float32, torch.float32, torch.float32),
          (torch.bfloat16, torch.float32, torch.float32, torch.float32),
          (torch.bfloat16, torch.bfloat16, torch.bfloat16, torch.float32),
          (torch.float16, torch.float32, torch.float32, torch.float32),
          (torch.float32, torch.bfloat16, torch.float32, torch.float32),
          (torch.float32, torch.bfloat16, torch.float32, torch.bfloat16))
# The largest tensor of one chunk of (h, act) pairs ([pairs, T, k, H]): the benchmark shapes (T = 1024, k = 8,
# H = 7168: 235 MB a pair in fp32) take one pair at a time, the tests all nine at once.
CHUNK_BYTES = 256 << 20
# The rounding of one add into a bf16 accumulator: half a unit in the last place, relative (8 significant bits).
BF16_HALF_ULP = 2.0 ** -8


def stored(x: torch.Tensor, dtype) -> torch.Tensor:
    """x as stored in `dtype` (round to nearest even), back in x's dtype; fp32 keeps x."""
    return x if dtype == torch.float32 else x.to(dtype).to(x.dtype)


def _e2m1(magnitude: torch.Tensor) -> torch.Tensor:
    """Magnitudes to the nearest e2m1 value, ties to the even code, saturating at 6: the grid's step is 0.5
    below 2, 1 below 4 and 2 above, and each step's even multiples are the even codes."""
    m = magnitude.clamp(max=E2M1_MAX)
    step = torch.where(m < 2, 0.5, torch.where(m < 4, 1.0, 2.0)).to(m.dtype)
    return torch.round(m / step) * step


def _block_scale(amax: torch.Tensor, gs: float) -> torch.Tensor:
    e4m3 = (amax / E2M1_MAX / gs).clamp(max=E4M3_MAX).float().to(torch.float8_e4m3fn).to(amax.dtype)
    return e4m3 * gs


def _round_trip(v: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    safe = torch.where(scale > 0, scale, torch.ones_like(scale))
    return torch.where(scale > 0, torch.sign(v) * _e2m1(v.abs() / safe) * scale, torch.zeros_like(v))


def nvfp4_band(center, lo, hi, gs: float, beta):
    """(q, dev) for [R, C] values: q is the NVFP4 round trip of `center` (block scale e4m3(amax/6/gs), e2m1
    nearest-even), dev the largest distance from q of the round trip of any value in [lo, hi] whose
    arithmetic is also off by the relative `beta` (a number, or one per block [R, C/16, 1])."""
    blocks = [t.unflatten(-1, (-1, BLOCK_SIZE)) for t in (center, torch.minimum(lo, hi), torch.maximum(lo, hi))]
    c, low, high = blocks
    low, high = low - beta * low.abs(), high + beta * high.abs()
    scale = _block_scale(c.abs().amax(-1, keepdim=True), gs)
    q = _round_trip(c, scale)
    inner = torch.where(low > 0, low, torch.where(high < 0, -high, torch.zeros_like(low)))
    scales = (_block_scale(inner.amax(-1, keepdim=True) * (1 - beta), gs),
              _block_scale(torch.maximum(low.abs(), high.abs()).amax(-1, keepdim=True) * (1 + beta), gs))
    dev = torch.zeros_like(q)
    for s in scales:
        for v in (low, high):
            dev = torch.maximum(dev, (_round_trip(v, s) - q).abs())
    return q.flatten(-2), dev.flatten(-2)


def _is_power_of_two(x: torch.Tensor) -> torch.Tensor:
    mantissa, _ = torch.frexp(x)
    return mantissa.abs() == 0.5


def _activation_band(x: torch.Tensor, g1: float):
    """Stage 1: (q, dev) of x. The band is the kernel's own scale arithmetic, none where scale × gs is a
    power of two (then x / scale is exact and a tie is a tie)."""
    blocks = x.unflatten(-1, (-1, BLOCK_SIZE))
    scale = _block_scale(blocks.abs().amax(-1, keepdim=True), g1)
    beta = torch.where(_is_power_of_two(scale), 0.0, SCALE_NOISE).to(x.dtype)
    return nvfp4_band(x, x, x, g1, beta)


def _silu_up(gate, up):
    return gate * torch.sigmoid(gate) * up


def _act_band(h, eps, inter: int, hdt, adt):
    """(act as stored, low, high) from h [P, 2I] ± eps, h stored in `hdt`, act in `adt`."""
    hc, hlo, hhi = stored(h, hdt), stored(h - eps, hdt), stored(h + eps, hdt)
    center = _silu_up(hc[:, :inter], hc[:, inter:])
    corners = torch.stack([_silu_up(g[:, :inter], u[:, inter:]) for g in (hlo, hhi) for u in (hlo, hhi)])
    low, high = corners.amin(0), corners.amax(0)
    low, high = low - NOISE * low.abs(), high + NOISE * high.abs()
    return stored(center, adt), stored(low, adt), stored(high, adt)


def _expert_weights(data, dtype):
    (_, _, _, w1, w1_sf, _, w1_gs, w2, w2_sf, _, w2_gs, _, _, _) = data
    for e in range(w1.shape[0]):
        yield (dequantize(w1[e], w1_sf[e], dtype) * float(w1_gs[e]),
               dequantize(w2[e], w2_sf[e], dtype) * float(w2_gs[e]))


def outside(data, output: torch.Tensor) -> torch.Tensor:
    """Elements of `output` [T, H] that no precision profile reaches (True = outside every envelope)."""
    (x, ids, weights, w1, _, _, _, _, _, _, _, a1_gs, a2_gs, _) = data
    dtype = torch.float64 if x.device.type == "cpu" else torch.float32
    got = output.to(dtype)
    g1, g2, inter = float(a1_gs[0]), float(a2_gs[0]), w1.shape[1] // 2
    xq, xdev = _activation_band(x.to(dtype), g1)
    # Every expert's (token, slot) rows one after another: the element-wise stages run once over all of them,
    # the GEMMs once per expert on its segment.
    tokens, slots, hs, epss, segments = [], [], [], [], []
    for e, (w1e, w2e) in enumerate(_expert_weights(data, dtype)):
        token, slot = torch.nonzero(ids == e, as_tuple=True)
        if token.numel():
            tokens.append(token)
            slots.append(slot)
            hs.append(xq[token] @ w1e.T)
            epss.append((NOISE * xq[token].abs() + xdev[token]) @ w1e.abs().T)
            segments.append((token.numel(), w2e, w2e.abs()))
    ok = torch.zeros_like(got, dtype=torch.bool)
    if not tokens:
        return ~ok
    token, slot, h, eps = torch.cat(tokens), torch.cat(slots), torch.cat(hs), torch.cat(epss)
    weight = weights[token, slot].to(dtype).unsqueeze(1)
    # The nine (h, act) dtype pairs side by side on a leading dimension, as many at once as keep the largest
    # tensor ([pairs, T, k, H]) within CHUNK_BYTES: each stage runs once per chunk (the tests' shapes: one).
    pairs = [(hdt, adt) for hdt in INTERMEDIATE for adt in INTERMEDIATE]
    per_pair = got.numel() * ids.shape[1] * got.element_size()
    at_once = max(1, min(len(pairs), CHUNK_BYTES // max(per_pair, 1)))
    sizes = [n for n, _, _ in segments]
    for first in range(0, len(pairs), at_once):
        acts, lows, highs, overflows = [], [], [], []
        for hdt, adt in pairs[first:first + at_once]:
            act, low, high = _act_band(h, eps, inter, hdt, adt)
            acts.append(act)
            lows.append(low)
            highs.append(high)
            # A row whose h or act overflows this profile's dtype (fp16 past 65504) has no output in this
            # profile: its saturated requantization would otherwise be taken for a possible answer.
            overflows.append(~(torch.isfinite(act).all(-1) & torch.isfinite(stored(h, hdt)).all(-1)))
        q, dev = nvfp4_band(torch.stack(acts), torch.stack(lows), torch.stack(highs), g2, SCALE_NOISE)
        q = torch.where(torch.stack(overflows)[..., None], torch.full_like(q, float("nan")), q)
        ys, bands = [], []
        for qe, deve, (_, w2e, w2abs) in zip(q.split(sizes, dim=1), dev.split(sizes, dim=1), segments):
            ys.append(qe @ w2e.T)
            bands.append((NOISE * qe.abs() + deve) @ w2abs.T)
        y, band = torch.cat(ys, dim=1), torch.cat(bands, dim=1)
        for ydt, cdt, wdt, acc in FINISH:
            ok |= _within(got, token, slot, weight, y, band, ydt, cdt, wdt, acc, output.dtype, ids.shape[1])
    return ~ok


def _rounded(x: torch.Tensor, dtype, toward: float) -> torch.Tensor:
    """x stored in `dtype`, rounded toward -inf or +inf (`toward`), back in x's dtype."""
    if dtype == torch.float32 and x.dtype == torch.float32:
        return x
    near = x.to(dtype)
    beyond = torch.nextafter(near, torch.full_like(near, toward)).to(x.dtype)
    near = near.to(x.dtype)
    passed = (near < x) if toward > 0 else (near > x)      # nearest fell on the band's inner side
    return torch.where(passed, beyond, near)


def _within(got, token, slot, weight, y, band, ydt, cdt, wdt, acc, out_dtype, k: int) -> torch.Tensor:
    """Where `got` lies in this profile's envelope for any of the (h, act) pairs on y's leading dimension: its
    combine, then either neighbour in the output dtype of the band's ends (the band's low end rounded down, its
    high end rounded up). A bf16 accumulator (`acc`) rounds each of the k - 1 adds after the first: each moves
    the sum by at most half a bf16 unit of a partial sum, and no partial sum, in any order, exceeds the sum of
    the terms' magnitudes. y and band: [pairs, rows, H], one row per (token, slot)."""
    ys = stored(y, ydt)
    reach = torch.maximum((stored(y - band, ydt) - ys).abs(), (stored(y + band, ydt) - ys).abs()) \
        if ydt != torch.float32 else band
    if cdt == torch.float32:
        term, spread = ys * weight, reach * weight.abs()
    else:                                        # each weighted term stored in bf16 (the weight as wdt)
        w = stored(weight, wdt)
        term = stored(ys * w, cdt)
        spread = torch.maximum((stored((ys - reach) * w, cdt) - term).abs(),
                               (stored((ys + reach) * w, cdt) - term).abs())
    pairs = y.shape[0]
    center = torch.zeros(pairs, got.shape[0], k, got.shape[1], dtype=got.dtype, device=got.device)
    allowance = torch.zeros_like(center)        # one row per (token, slot): each written once, no scatter-add
    center[:, token, slot] = term
    allowance[:, token, slot] = spread + NOISE * term.abs()
    magnitude = center.abs().sum(2)
    center, allowance = center.sum(2), allowance.sum(2)
    if acc != torch.float32:
        allowance = allowance + (k - 1) * BF16_HALF_ULP * (magnitude + allowance)
    low = _rounded(center - allowance, out_dtype, float("-inf"))
    high = _rounded(center + allowance, out_dtype, float("inf"))
    # A profile whose intermediates overflow (fp16 past 65504) reaches no finite output: an infinite band
    # there would accept anything.
    finite = torch.isfinite(center) & torch.isfinite(allowance)
    return (finite & (got >= low) & (got <= high)).any(0)
