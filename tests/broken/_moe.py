"""A kernel-shaped pure-PyTorch nvfp4_moe with one switchable bug (each moe_*.py beside this passes one).

It reads the weights' scales from the BLOCKED copies (as a kernel's TMA loads them) through the 128x4
layout's byte offsets, quantizes with its own e2m1 rounding, and groups tokens per expert. `run(data,
bug=None)` is a correct kernel; `precision` stores the intermediates as a production kernel does (VLLM:
vLLM's cutlass_moe_fp4 steps, bf16 GEMM outputs, bf16 SiLU·up, bf16 weight × bf16 y) and quantizes with a
reciprocal multiply, as its quantization kernel does.
"""
import torch

E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def _plain_from_blocked(blocked: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """Scales [rows, cols] gathered from one expert's blocked bytes (offsets of the 128x4 layout)."""
    r = torch.arange(rows, device=blocked.device).view(rows, 1)
    c = torch.arange(cols, device=blocked.device).view(1, cols)
    col_tiles = (cols + 3) // 4
    offset = ((r // 128) * col_tiles + c // 4) * 512 + (r % 32) * 16 + ((r % 128) // 32) * 4 + c % 4
    return blocked.view(torch.uint8)[offset].view(torch.float8_e4m3fn)


def _decode(packed, scales):
    raw = packed.view(torch.uint8)
    codes = torch.stack((raw & 0x0F, raw >> 4), dim=-1).flatten(-2).long()
    table = torch.tensor(E2M1 + tuple(-v for v in E2M1), device=raw.device)
    return table[codes] * scales.float().repeat_interleave(16, dim=-1)


VLLM = {"hidden": torch.bfloat16, "act": torch.bfloat16, "y": torch.bfloat16, "combine": torch.bfloat16}
# vLLM/SGLang fused_moe with MUL_ROUTED_WEIGHT: the weight applied to GEMM2's fp32 accumulator, stored as bf16
ROUTED_WEIGHT = {"hidden": torch.bfloat16, "act": torch.bfloat16, "weighted": torch.bfloat16}
# TensorRT-LLM's fused finalize: each expert's weighted output rounded to bf16 and added atomically into a bf16
# output (every partial sum rounded to bf16, in expert order here; the hardware's order varies)
ATOMIC_BF16 = {"hidden": torch.bfloat16, "act": torch.bfloat16, "weighted": torch.bfloat16, "atomic": torch.bfloat16}


def _stored(x, dtype):
    return x if dtype is None else x.to(dtype).float()


def _round_trip(x, global_scale, ties="even", reciprocal=False):
    blocks = x.float().unflatten(-1, (-1, 16))
    amax = blocks.abs().amax(-1, keepdim=True)
    raw = amax * (1.0 / 6.0) * (1.0 / global_scale) if reciprocal else amax / 6.0 / global_scale
    scale = raw.clamp(max=448.0).to(torch.float8_e4m3fn).float() * global_scale
    if reciprocal:
        scaled = blocks * torch.where(scale > 0, 1.0 / torch.where(scale > 0, scale, 1.0), torch.zeros_like(scale))
    else:
        scaled = torch.where(scale > 0, blocks / torch.where(scale > 0, scale, 1.0), torch.zeros_like(blocks))
    grid = torch.tensor(E2M1, device=x.device)
    mag = scaled.abs().clamp(max=6.0)
    below = torch.bucketize(mag, grid, right=True).clamp(1, 7) - 1
    lo, hi = grid[below], grid[(below + 1).clamp(max=7)]
    tie = mag - lo == hi - mag
    if ties == "away":
        pick_hi = (mag - lo > hi - mag) | tie
    elif ties == "truncate":
        pick_hi = mag >= hi
    else:
        pick_hi = (mag - lo > hi - mag) | (tie & (below % 2 == 1))
    return (torch.sign(scaled) * torch.where(pick_hi & (below < 7), hi, lo) * scale).flatten(-2)


def _remapped(blocked, rows, cols, bug):
    """The scale-factor remap bugs: the plain [rows, cols] scales a kernel gathers with a wrong index map."""
    r = torch.arange(rows, device=blocked.device).view(rows, 1)
    c = torch.arange(cols, device=blocked.device).view(1, cols)
    if bug == "sf_row_off_by_one":                  # scale row r + 1 (the last row reads its own)
        r = (r + 1).clamp(max=rows - 1)
    elif bug == "sf_k_off_by_one":                  # scale column j + 1 for K block j
        c = (c + 1).clamp(max=cols - 1)
    col_tiles = (cols + 3) // 4
    if bug == "sf_k_as_index":                      # the K-tile count taken from K, not K/16: wrong row-tile stride
        col_tiles = (cols * 16 + 3) // 4
    inner = (r % 32) * 16 + ((r % 128) // 32) * 4 + c % 4
    if bug == "sf_32x4_transposed":                 # the 32x4 sub-tile read row-major: r % 128 * 4 + c % 4
        inner = (r % 128) * 4 + c % 4
    offset = ((r // 128) * col_tiles + c // 4) * 512 + inner
    flat = blocked.view(torch.uint8).reshape(-1)
    offset = offset % flat.numel()                  # a wrapped read: memory beyond the buffer is unknown anyway
    return flat[offset].view(torch.float8_e4m3fn)


def _scales(sf, sf_blocked, e, bug):
    rows, cols = sf.shape[1], sf.shape[2]
    if bug == "expert_offset_unpadded":         # expert e's scales at e x rows x cols bytes of the whole buffer:
        flat = sf_blocked.view(torch.uint8).reshape(-1)     # the 128-row padding of each expert's tiles ignored
        start = e * rows * cols
        return _plain_from_blocked(flat[start:start + sf_blocked[e].numel()], rows, cols)
    if bug == "scales_blocked_as_plain":        # the blocked bytes taken as if row-major: no remap
        return sf_blocked[e].view(torch.uint8)[:rows * cols].reshape(rows, cols).view(torch.float8_e4m3fn)
    if bug and bug.startswith("sf_"):
        return _remapped(sf_blocked[e], rows, cols, bug)
    return _plain_from_blocked(sf_blocked[e], rows, cols)


def run(data, bug=None, precision=None):
    (x, ids, weights, w1, w1_sf, w1_sf_blocked, w1_gs, w2, w2_sf, w2_sf_blocked, w2_gs, a1_gs, a2_gs, out) = data
    kind = precision or {}
    quant = {"ties": {"ties_away": "away", "requant_truncated": "truncate"}.get(bug, "even"),
             "reciprocal": precision is not None}
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        xq = x.float() if bug == "activation_not_quantized" else _round_trip(
            x.float(), a1_gs.float(), **(quant if bug != "requant_truncated" else {}))
        total = torch.zeros(out.shape, dtype=torch.float32, device=out.device)
        inter = w1.shape[1] // 2
        stale, owed = None, False
        if bug == "duplicate_ids_once":             # dense routing weights built by assignment: a token routed
            dense = torch.zeros(ids.shape[0], w1.shape[0], device=ids.device)   # twice to one expert counts once
            dense[torch.arange(ids.shape[0], device=ids.device).unsqueeze(1).expand_as(ids), ids.long()] = weights
        for e in range(w1.shape[0]):
            token, slot = torch.nonzero(ids == e, as_tuple=True)
            if bug == "duplicate_ids_once":
                token = torch.nonzero(dense[:, e] != 0).flatten()
                slot = None
            if token.numel() == 0:
                owed = bug == "stale_tile"          # this expert's (stale) tile lands on the next one's first row
                continue
            g1 = 1.0 if bug == "alpha_without_weight_scale" else w1_gs[e]
            hidden = _stored(xq[token] @ (_decode(w1[e], _scales(w1_sf, w1_sf_blocked, e, bug)) * g1).T,
                             kind.get("hidden"))
            gate, up = hidden[:, :inter], hidden[:, inter:]
            if bug == "gate_up_swapped":
                gate, up = up, gate
            act = _stored(torch.nn.functional.silu(gate) * up, kind.get("act"))
            act = act if bug == "requant_skipped" else _round_trip(act, a2_gs.float(), **quant)
            y = _stored(act @ (_decode(w2[e], _scales(w2_sf, w2_sf_blocked, e, bug)) * w2_gs[e]).T, kind.get("y"))
            if owed:
                y[0] = stale if stale is not None else 0.0
                owed = False
            stale = y[-1].clone()
            weight = dense[token, e] if slot is None else \
                torch.ones_like(weights[token, slot]) if bug == "combine_unweighted" else weights[token, slot]
            if kind.get("weighted") is not None:    # the router weight applied to the fp32 y, stored once
                contribution = (y * weight.unsqueeze(1)).to(kind["weighted"]).float()
            elif kind.get("combine") is not None:
                contribution = (y.to(kind["combine"]) * weight.to(kind["combine"]).unsqueeze(1)).float()
            else:
                contribution = y * weight.unsqueeze(1)
            if kind.get("atomic") is not None:      # a bf16 accumulator: each add rounds the running sum
                for row, value in zip(token.tolist(), contribution):
                    total[row] = (total[row] + value).to(kind["atomic"]).float()
            else:
                total.index_add_(0, token, contribution)
        if bug == "nudged":                         # a uniform 1 % error
            total = total * 1.01
        rounded = total.to(out.dtype)
        if kind.get("final") == "other":            # the other neighbour of the exact sum (not the nearest)
            up = torch.nextafter(rounded, torch.full_like(rounded, float("inf")))
            down = torch.nextafter(rounded, torch.full_like(rounded, float("-inf")))
            exact = rounded.float()
            rounded = torch.where(exact < total, up, torch.where(exact > total, down, rounded))
        out.copy_(rounded)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    return out
