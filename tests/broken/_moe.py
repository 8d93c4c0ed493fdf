"""A kernel-shaped pure-PyTorch nvfp4_moe with one switchable bug (each moe_*.py beside this passes one).

It reads the weights' scales from the BLOCKED copies (as a kernel's TMA loads them) through the 128x4
layout's byte offsets, quantizes with its own e2m1 rounding, and groups tokens per expert. `run(data,
bug=None)` is a correct kernel.
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


def _round_trip(x, global_scale):
    blocks = x.unflatten(-1, (-1, 16))
    scale = (blocks.abs().amax(-1, keepdim=True) / 6.0 / global_scale).clamp(max=448.0)
    scale = scale.to(torch.float8_e4m3fn).float() * global_scale
    scaled = torch.where(scale > 0, blocks / torch.where(scale > 0, scale, 1.0), torch.zeros_like(blocks))
    grid = torch.tensor(E2M1, device=x.device)
    mag = scaled.abs().clamp(max=6.0)
    below = torch.bucketize(mag, grid, right=True).clamp(1, 7) - 1
    lo, hi = grid[below], grid[(below + 1).clamp(max=7)]
    pick_hi = (mag - lo > hi - mag) | ((mag - lo == hi - mag) & (below % 2 == 1))
    return (torch.sign(scaled) * torch.where(pick_hi & (below < 7), hi, lo) * scale).flatten(-2)


def _scales(sf, sf_blocked, e, bug):
    rows, cols = sf.shape[1], sf.shape[2]
    if bug == "scales_blocked_as_plain":        # the blocked bytes taken as if row-major: no remap
        return sf_blocked[e].view(torch.uint8)[:rows * cols].reshape(rows, cols).view(torch.float8_e4m3fn)
    return _plain_from_blocked(sf_blocked[e], rows, cols)


def run(data, bug=None):
    (x, ids, weights, w1, w1_sf, w1_sf_blocked, w1_gs, w2, w2_sf, w2_sf_blocked, w2_gs, a1_gs, a2_gs, out) = data
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        xq = x.float() if bug == "activation_not_quantized" else _round_trip(x.float(), a1_gs.float())
        total = torch.zeros(out.shape, dtype=torch.float32, device=out.device)
        inter = w1.shape[1] // 2
        for e in range(w1.shape[0]):
            token, slot = torch.nonzero(ids == e, as_tuple=True)
            if token.numel() == 0:
                continue
            g1 = 1.0 if bug == "alpha_without_weight_scale" else w1_gs[e]
            hidden = xq[token] @ (_decode(w1[e], _scales(w1_sf, w1_sf_blocked, e, bug)) * g1).T
            gate, up = hidden[:, :inter], hidden[:, inter:]
            if bug == "gate_up_swapped":
                gate, up = up, gate
            act = torch.nn.functional.silu(gate) * up
            act = act if bug == "requant_skipped" else _round_trip(act, a2_gs.float())
            y = act @ (_decode(w2[e], _scales(w2_sf, w2_sf_blocked, e, bug)) * w2_gs[e]).T
            weight = torch.ones_like(weights[token, slot]) if bug == "combine_unweighted" else weights[token, slot]
            total.index_add_(0, token, y * weight.unsqueeze(1))
        out.copy_(total.to(out.dtype))
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    return out
