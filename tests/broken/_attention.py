"""A kernel-shaped pure-PyTorch fp8_attention with one switchable bug (each attn_*.py beside this passes one).

Like a flash-attention kernel it walks the keys in blocks of 64 with an online softmax (running max and sum
in fp32), reads Q, K, V from memory as [B, H, S, D] through explicit strides, and decodes FP8 through a
256-entry table (the field story's LUT). `run(data, bug=None)` is a correct kernel; `precision="fa3"` quantizes P to e4m3 as FlashAttention-3's FP8
path does (P = exp(s - running max) × 2^8, the row sum from the unquantized P).
"""
import math

import torch

BLOCK = 64
_tables = {}
_calls = [0]


def _table(device) -> torch.Tensor:
    """value of every e4m3 byte, built once per device."""
    if device not in _tables:
        codes = torch.arange(256, dtype=torch.uint8, device=device)
        _tables[device] = codes.view(torch.float8_e4m3fn).to(torch.float32)
    return _tables[device]


def _load(x8: torch.Tensor, scale: torch.Tensor, table, heads_rows_swapped=False) -> torch.Tensor:
    """[B, H, S, D] real values from the bytes at x8's address, as a kernel reads memory."""
    b, h, s, d = x8.shape
    raw = x8.contiguous().view(torch.uint8)
    values = table[raw.long()]
    if heads_rows_swapped:          # the wrong leading dimension: memory read as [B, S, H, D]
        values = values.reshape(b, s, h, d).transpose(1, 2)
    return values * scale.to(torch.float32)


def start_row_of_last_diagonal(s: int) -> int:
    """The first key of the last block: the tile the stale-tile bug leaves unreloaded."""
    return (s - 1) // BLOCK * BLOCK


def run(data, bug=None, precision=None):
    q8, k8, v8, q_scale, k_scale, v_scale, causal, out = data
    b, h, s, d = q8.shape
    table = _table(q8.device)
    if bug == "race":               # the table read before every entry was written, on some calls
        _calls[0] += 1
        if _calls[0] % 3 == 2:
            table = table.clone()
            table[torch.arange(0, 256, 7, device=table.device)] = 0.0
    one = torch.ones(1, device=q8.device)
    q = _load(q8, one if bug == "qk_scales_ignored" else q_scale, table)
    k = _load(k8, one if bug == "qk_scales_ignored" else k_scale, table, bug == "k_heads_rows_swapped")
    v = _load(v8, one if bug == "v_scale_ignored" else v_scale, table)
    if bug == "v_clipped":
        v = v.clamp(-1.0, 1.0)
    scale = 1.0 if bug == "no_softmax_scale" else 1.0 / math.sqrt(d)
    running_max = torch.full((b, h, s, 1), float("-inf"), device=q.device)
    running_sum = torch.zeros((b, h, s, 1), device=q.device)
    acc = torch.zeros((b, h, s, d), device=q.device)
    rows = torch.arange(s, device=q.device).view(s, 1)
    previous = None
    for start in range(0, s, BLOCK):
        keys = torch.arange(start, min(s, start + BLOCK), device=q.device).view(1, -1)
        scores = torch.matmul(q, k[:, :, start:start + BLOCK].transpose(-1, -2)) * scale
        if causal and bug != "causal_ignored":
            hidden = keys >= rows if bug == "diagonal_hidden" else keys > rows
            scores = scores.masked_fill(hidden, float("-inf"))
        if bug == "no_max_subtraction":
            weights = torch.exp(scores)
            running_sum = running_sum + weights.sum(-1, keepdim=True)
            acc = acc + torch.matmul(weights, v[:, :, start:start + BLOCK])
            continue
        if bug == "stale_score_tile" and causal and start + BLOCK > start_row_of_last_diagonal(s) and \
                previous is not None and previous.shape == scores.shape:
            scores = previous.masked_fill(keys > rows, float("-inf"))   # the diagonal tile's scores not reloaded
        previous = scores
        new_max = torch.maximum(running_max, scores.amax(-1, keepdim=True))
        safe = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
        correction = torch.exp(running_max - safe)
        if bug == "unrescaled_accumulator" and causal:
            correction_acc = torch.ones_like(correction)
        else:
            correction_acc = correction
        if precision == "fa3":
            weights = torch.exp(scores - safe) * 256.0
            p = weights.to(torch.float8_e4m3fn).to(torch.float32)
        else:
            weights = p = torch.exp(scores - safe)
        running_sum = running_sum * correction + weights.sum(-1, keepdim=True)
        acc = acc * correction_acc + torch.matmul(p, v[:, :, start:start + BLOCK])
        running_max = new_max
    result = acc if bug == "not_normalised" else acc / running_sum
    if bug == "out_saturated":      # an epilogue that clamps to a bound meant for another format
        result = result.clamp(-0.125, 0.125)
    out.copy_(result.to(out.dtype))
    return out
