"""Building blocks for the tasks' `generate_input`: fp4 operands, e4m3 scales, their permuted copies, outputs.

Each function makes exactly the random calls its docstring names, on the device it is given, so a task
that calls them in the competition's order gets, on CUDA, the same tensors from the same seed as the
official generator. Layout facts (shapes, strides, the permuted 128x4 view) are in arena/nvfp4/layouts.py.

Besides the competition's distributions there are two of our own for robustness runs:
- "allcodes": every fp4 code on both nibbles and e4m3 scales 0x01..0x57 (subnormals up to 15);
- "quantized": Gaussian data quantized as NVFP4 models do (fractional scales).
"""
from __future__ import annotations

import torch

from arena.nvfp4.formats import BLOCK_SIZE, quantize_nvfp4
from arena.nvfp4.layouts import ROWS_PER_TILE, COLS_PER_TILE, ceil_div, to_permuted

DISTRIBUTIONS = ("official", "allcodes", "quantized")
# Keep each nibble's sign bit and two low bits: codes {0-3, 8-11} = {0, ±0.5, ±1, ±1.5} (dual and group gemm).
SIGN_AND_LOW_BITS = 0b1011_1011


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def check_distribution(data: str):
    if data not in DISTRIBUTIONS:
        raise ValueError(f"unknown data distribution {data!r}: use one of {', '.join(DISTRIBUTIONS)}")


def fp4_operand(l: int, rows: int, k: int, device, low: int, high: int, dtype=torch.uint8,
                mask: int | None = None) -> torch.Tensor:
    """One `randint(low, high, (l, rows, k/2), dtype)` of bytes (optionally AND-ed with `mask`), viewed as
    float4_e2m1fn_x2 [rows, K/2, l] with strides (K/2, 1, rows*K/2)."""
    raw = torch.randint(low, high, (l, rows, k // 2), dtype=dtype, device=device)
    if mask is not None:
        raw = raw & mask
    return raw.permute(1, 2, 0).view(torch.float4_e2m1fn_x2)


def fp16_output(l: int, m: int, n: int, device) -> torch.Tensor:
    """One `randn((l, m, n), fp16)` viewed as [m, n, l]: the pre-filled output buffer c."""
    return torch.randn((l, m, n), dtype=torch.float16, device=device).permute(1, 2, 0)


def int_scales(l: int, mn: int, sf_k: int, low: int, high: int, device) -> torch.Tensor:
    """One `randint(low, high, (l, mn, sf_k), int8)` converted to e4m3: plain scales [mn, sf_k, l]."""
    ints = torch.randint(low, high, (l, mn, sf_k), dtype=torch.int8, device=device)
    return ints.to(torch.float8_e4m3fn).permute(1, 2, 0)


def uniform_scales(l: int, mn: int, sf_k: int, device) -> torch.Tensor:
    """One `rand((l, mn, sf_k), fp32)` rounded to e4m3 (values in [0, 1], subnormals included)."""
    return torch.rand((l, mn, sf_k), dtype=torch.float32, device=device).to(torch.float8_e4m3fn).permute(1, 2, 0)


def allcodes_scales(l: int, mn: int, sf_k: int, device) -> torch.Tensor:
    """e4m3 bytes 0x01..0x57: subnormals (2^-9 ...) up to 15, every mantissa; no zeros, no NaN."""
    raw = torch.randint(1, 0x58, (l, mn, sf_k), dtype=torch.uint8, device=device)
    return raw.view(torch.float8_e4m3fn).permute(1, 2, 0)


def permuted_shape(l: int, mn: int, sf_k: int) -> tuple:
    """The contiguous buffer behind a permuted scale tensor: (l, ceil(mn/128), ceil(sf_k/4), 32, 4, 4)."""
    return (l, ceil_div(mn, ROWS_PER_TILE), ceil_div(sf_k, COLS_PER_TILE), 32, 4, COLS_PER_TILE)


def int_padding(l: int, mn: int, sf_k: int, low: int, high: int, device) -> torch.Tensor:
    """One `randint(low, high, buffer shape, int8)` as e4m3: what the permuted tensor holds where no scale is."""
    ints = torch.randint(low, high, permuted_shape(l, mn, sf_k), dtype=torch.int8, device=device)
    return ints.to(torch.float8_e4m3fn)


def official_scales(l: int, mn: int, sf_k: int, low: int, high: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """One operand's integer scales and their permuted copy, whose padding is random too: two random calls
    in the competition's order (the scales, then the padding)."""
    plain = int_scales(l, mn, sf_k, low, high, device)
    return plain, permuted(plain, int_padding(l, mn, sf_k, low, high, device))


def permuted(plain: torch.Tensor, padding: torch.Tensor | None = None, device=None) -> torch.Tensor:
    """The permuted copy (32, 4, rb, 4, cb, l) of plain scales, built on `device` (default: padding's, else
    the scales'). Without `padding` the unused entries hold 1.0. No random calls."""
    device = device or (padding.device if padding is not None else plain.device)
    return to_permuted(plain.to(device), padding)


def quantized_operand(l: int, rows: int, k: int, device):
    """Gaussian rows with per-row magnitude spread, quantized to NVFP4: (values [rows, K/2, l], plain scales
    [rows, K/16, l]). Random calls: one randn and one rand."""
    x = torch.randn((l, rows, k), device=device) * torch.rand((l, rows, 1), device=device).add(0.1)
    packed, scales = zip(*(quantize_nvfp4(x[i]) for i in range(l)))
    raw = torch.stack([p.view(torch.uint8) for p in packed])      # stack is not defined for fp4 dtypes
    values = raw.permute(1, 2, 0).view(torch.float4_e2m1fn_x2)
    plain = torch.stack([s.view(torch.uint8) for s in scales]).view(torch.float8_e4m3fn).permute(1, 2, 0)
    return values, plain


def scale_columns(k: int) -> int:
    return ceil_div(k, BLOCK_SIZE)
