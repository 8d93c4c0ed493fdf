"""fp8_attention's check: every output element must lie in the precision envelope of a kernel that quantizes
the softmax probabilities P to e4m3 as FlashAttention-3's FP8 path does (docs/tasks.md, "fp8_attention: the
precision envelope"), and the output as a whole must carry no systematic error.

Per element: with p_j = exp(s_j - max) and l = sum p_j, a kernel may use any p'_j with |p'_j - p_j| <= 2^-4 p_j
+ 2^-17 (e4m3's half step, relative to any running max no larger than the final one, and its smallest
subnormal under FA3's offset of 8 binades) in the P·V product and in the row sum or not; the output then moves
by at most sum |p'_j - p_j| (|v_j| + |o|) / l', bounded by the worst case and by six standard deviations of
independent roundings, whichever is smaller. Scores may carry fp32 noise; the output may be either bf16
neighbour of the band's ends.

Over the whole output: the mean signed error in the direction of the reference, relative to the mean |o|, must
stay within BIAS: rounding to nearest is unbiased, so a uniform 1 % error (or a scale off by a few per cent)
fails here however wide the per-element band.

Used by reference.py (`check_implementation`); one head at a time, so the S×S scores stay small.
"""
import math

import torch

P_STEP = 2.0 ** -4          # e4m3's largest relative half step
P_FLOOR = 2.0 ** -17        # e4m3's smallest subnormal (2^-9) under FA3's 2^8 offset, in units of the row max
SIGMAS = 6.0
SCORE_NOISE = 2.0 ** -20    # fp32 dot products over D in any order, fast exp2
BIAS = 2.5e-3               # largest mean signed error a correct kernel shows, relative to the mean |o|


def _dequantized(x8, scale, dtype):
    return x8.to(dtype) * scale.to(dtype)


def _head_envelope(q, k, v, causal: bool):
    """(o, allowance) for one [B, S, D] slice (or one head) in the working dtype."""
    s, d = q.shape[-2], q.shape[-1]
    scale = 1.0 / math.sqrt(d)
    scores = q @ k.transpose(-1, -2) * scale
    noise = SCORE_NOISE * (q.abs() @ k.abs().transpose(-1, -2)) * scale
    visible = torch.ones(s, s, dtype=torch.bool, device=q.device)
    if causal:
        visible = visible.tril()
    scores = scores.masked_fill(~visible, float("-inf"))
    p = torch.exp(scores - scores.amax(-1, keepdim=True))
    total = p.sum(-1, keepdim=True)
    o = p @ v / total
    # |v_j| + |o_i| for each (query i, key j, column): kept as two products to stay [S, D]
    spread_abs = p @ v.abs() + p.sum(-1, keepdim=True) * o.abs()                      # sum p (|v| + |o|)
    spread_sq = (p * p) @ (v * v) + 2 * (p * p) @ v.abs() * o.abs() + (p * p).sum(-1, keepdim=True) * o * o
    count = visible.sum(-1, keepdim=True).to(q.dtype)
    floor = P_FLOOR * (visible.to(q.dtype) @ v.abs() + count * o.abs())
    worst = P_STEP * spread_abs
    statistical = SIGMAS * P_STEP / math.sqrt(3.0) * spread_sq.clamp(min=0).sqrt()
    score_noise = (noise.masked_fill(~visible, 0).amax(-1, keepdim=True)) * spread_abs
    allowance = (torch.minimum(worst, statistical) + floor + score_noise) / (total * (1 - P_STEP))
    return o, allowance


def envelope(data):
    """(o, allowance): the exact output [B, H, S, D] and the largest legitimate distance from it per element."""
    q8, k8, v8, qs, ks, vs, causal, _ = data
    dtype = torch.float64 if q8.device.type == "cpu" else torch.float32
    q, k, v = _dequantized(q8, qs, dtype), _dequantized(k8, ks, dtype), _dequantized(v8, vs, dtype)
    o, allowance = torch.empty_like(q), torch.empty_like(q)
    for b in range(q.shape[0]):
        for h in range(q.shape[1]):
            o[b, h], allowance[b, h] = _head_envelope(q[b, h], k[b, h], v[b, h], bool(causal))
    return o, allowance


def bias(output: torch.Tensor, o: torch.Tensor) -> float:
    """The mean signed error in the direction of the reference, relative to the mean |o|."""
    magnitude = float(o.abs().sum())
    return float(((output.to(o.dtype) - o) * torch.sign(o)).sum()) / magnitude if magnitude else 0.0


def outside(data, output: torch.Tensor):
    """(elements outside the envelope, a line on a systematic error or "")."""
    o, allowance = envelope(data)
    got = output.to(o.dtype)
    low = (o - allowance).to(output.dtype).to(o.dtype)
    high = (o + allowance).to(output.dtype).to(o.dtype)
    mask = ~((got >= low) & (got <= high))
    drift = bias(output, o)
    if abs(drift) <= BIAS:
        return mask, ""
    pushed = (got - o) * torch.sign(o) * math.copysign(1.0, drift) > 0.5 * abs(drift) * o.abs()
    return mask | pushed, (f"a systematic error: the output is on average {abs(drift):.2%} "
                           f"{'larger' if drift > 0 else 'smaller'} in magnitude than the reference (rounding to "
                           f"nearest is unbiased; a correct kernel stays within {BIAS:.2%})")
