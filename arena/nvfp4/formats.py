"""NVFP4 number formats: e2m1 element codes, e4m3fn block scales, exact decoding and a quantizer.

Conventions (the competition's, and cuBLAS's):
- Two e2m1 values per byte; element 0 of each byte is the LOW nibble.
- Code bits: sign (bit 3), exponent (bits 2..1), mantissa (bit 0); magnitudes 0, .5, 1, 1.5, 2, 3, 4, 6.
- One e4m3fn scale per 16 consecutive K-elements.
Every e2m1 x e4m3 product is exact in fp16, bf16 and fp32, so decoding to fp32 loses nothing.
"""
from __future__ import annotations

import torch

BLOCK_SIZE = 16  # K-elements sharing one scale
E2M1_MAX = 6.0
E4M3_MAX = 448.0

# Value of each of the 16 e2m1 codes, indexed by code.
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
               -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


def _lut(device, dtype=torch.float32) -> torch.Tensor:
    return torch.tensor(E2M1_VALUES, dtype=dtype, device=device)


def as_bytes(packed: torch.Tensor) -> torch.Tensor:
    """The raw bytes of a packed fp4 tensor (float4_e2m1fn_x2, uint8 or int8), same shape and strides."""
    if packed.dtype == torch.uint8:
        return packed
    if packed.dtype in (torch.float4_e2m1fn_x2, torch.int8):
        return packed.view(torch.uint8)
    raise TypeError(f"expected packed fp4 (float4_e2m1fn_x2 or uint8), got {packed.dtype}")


def unpack_codes(packed: torch.Tensor) -> torch.Tensor:
    """Packed fp4 [..., K/2] -> uint8 codes [..., K]; element 0 of each byte is the low nibble."""
    raw = as_bytes(packed)
    low, high = raw & 0x0F, raw >> 4
    return torch.stack((low, high), dim=-1).flatten(-2)


def pack_codes(codes: torch.Tensor) -> torch.Tensor:
    """uint8 codes [..., K] (values 0..15, K even) -> packed float4_e2m1fn_x2 [..., K/2]."""
    if codes.shape[-1] % 2:
        raise ValueError(f"the last dimension must be even to pack two fp4 values per byte, got {codes.shape[-1]}")
    codes = codes.to(torch.uint8)
    pairs = codes.unflatten(-1, (-1, 2))
    raw = (pairs[..., 0] & 0x0F) | ((pairs[..., 1] & 0x0F) << 4)
    return raw.contiguous().view(torch.float4_e2m1fn_x2)


def decode_fp4(packed: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
    """Packed fp4 [..., K/2] -> values [..., K] (exact in any float dtype of 16 bits or more)."""
    codes = unpack_codes(packed)
    return _lut(codes.device, dtype)[codes.long()]


def decode_e4m3(scales: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
    """e4m3fn scales (float8_e4m3fn or their uint8 bytes) -> exact values."""
    if scales.dtype == torch.uint8:
        scales = scales.view(torch.float8_e4m3fn)
    if scales.dtype != torch.float8_e4m3fn:
        raise TypeError(f"expected float8_e4m3fn scales, got {scales.dtype}")
    return scales.to(dtype)


def dequantize(packed: torch.Tensor, scales: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
    """Packed fp4 [R, K/2] with plain scales [R, K/16] -> values [R, K] = e2m1 * scale (exact)."""
    values = decode_fp4(packed, dtype)
    k = values.shape[-1]
    if scales.shape[-1] * BLOCK_SIZE != k:
        raise ValueError(f"scales have {scales.shape[-1]} columns; K={k} needs {k // BLOCK_SIZE} (one per {BLOCK_SIZE})")
    return values * decode_e4m3(scales, dtype).repeat_interleave(BLOCK_SIZE, dim=-1)


def encode_e2m1(x: torch.Tensor) -> torch.Tensor:
    """Round float values to the nearest e2m1 code (ties to even mantissa, saturating at ±6)."""
    mag = x.abs().float().clamp(max=E2M1_MAX)
    grid = _lut(x.device)[:8]
    # Midpoints between neighbours; at a tie pick the neighbour with an even code (even mantissa).
    idx = torch.bucketize(mag, (grid[1:] + grid[:-1]) / 2)          # ties go to the lower neighbour
    tie = mag == ((grid[idx.clamp(max=6) + 1] + grid[idx.clamp(max=6)]) / 2)
    idx = torch.where(tie & (idx % 2 == 1) & (idx < 7), idx + 1, idx)
    sign = (x < 0) | ((x == 0) & torch.signbit(x))
    return (idx.to(torch.uint8) | (sign.to(torch.uint8) << 3))


def quantize_nvfp4(x: torch.Tensor, global_scale: float | None = None):
    """Quantize float [R, K] to NVFP4 as real models do: per 16-element block amax/6 -> e4m3 scale.

    Returns (packed float4_e2m1fn_x2 [R, K/2], scales float8_e4m3fn [R, K/16]). With `global_scale`
    the block scales are divided by it first (the fp32 tensor scale of two-level NVFP4); the caller
    multiplies the product by it. Used to make realistic test data with fractional scales.
    """
    if x.shape[-1] % BLOCK_SIZE:
        raise ValueError(f"K={x.shape[-1]} is not a multiple of {BLOCK_SIZE}")
    blocks = x.float().unflatten(-1, (-1, BLOCK_SIZE))
    block_scale = blocks.abs().amax(-1) / E2M1_MAX
    if global_scale is not None:
        block_scale = block_scale / global_scale
    scales = block_scale.clamp(max=E4M3_MAX).to(torch.float8_e4m3fn)
    s = scales.float().unsqueeze(-1)
    if global_scale is not None:
        s = s * global_scale
    scaled = torch.where(s > 0, blocks / torch.where(s > 0, s, 1), torch.zeros_like(blocks))
    return pack_codes(encode_e2m1(scaled).flatten(-2)), scales
