"""Exact NVFP4 block-scaled GEMM without FP4 tensor cores (CPU, Hopper, anything).

Decodes e2m1 x e4m3 exactly and multiplies in fp64 on the CPU, or in fp32 with TF32 off on a GPU.
For the competition's value distributions every partial sum is a multiple of 0.25 far below 2^22, so
fp32 accumulation is exact in any order and this matches cuBLAS on Blackwell bit for bit.
"""
from __future__ import annotations

import contextlib

import torch

from arena.nvfp4.formats import dequantize
from arena.nvfp4.layouts import to_blocked


def has_fp4_tensor_cores(device: torch.device) -> bool:
    """True on sm_100 and newer, where torch._scaled_mm runs NVFP4 (as the competition's reference)."""
    return device.type == "cuda" and torch.cuda.get_device_capability(device)[0] >= 10


def accumulation_dtype(device: torch.device) -> torch.dtype:
    return torch.float64 if device.type == "cpu" else torch.float32


@contextlib.contextmanager
def exact_fp32_matmul():
    """Turn TF32 off for the duration (it would round the fp32 operands to 10 mantissa bits)."""
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


@torch.no_grad()
def scaled_gemm(a: torch.Tensor, b: torch.Tensor, sfa: torch.Tensor, sfb: torch.Tensor) -> torch.Tensor:
    """One batch: A [M, K/2] fp4, B [N, K/2] fp4, plain scales [M, K/16], [N, K/16] -> A·Bᵀ [M, N], unrounded.

    Returned in fp64 (CPU) or fp32 (GPU); the caller rounds to the output dtype once.
    """
    dtype = accumulation_dtype(a.device)
    a_values = dequantize(a, sfa.to(a.device), dtype)
    b_values = dequantize(b, sfb.to(b.device), dtype)
    with exact_fp32_matmul():
        return a_values @ b_values.T


def fp4_gemm_reference(a, b, sfa, sfb, c: torch.Tensor) -> torch.Tensor:
    """C[:, :, l] = A[:, :, l]·B[:, :, l]ᵀ for every batch, written into `c` (fp16) and returned."""
    for l in range(c.shape[2]):
        c[:, :, l] = scaled_gemm(a[:, :, l], b[:, :, l], sfa[:, :, l], sfb[:, :, l]).to(c.dtype)
    return c


def blackwell_scaled_mm(a, b, sfa, sfb, out_dtype=torch.float16) -> torch.Tensor:
    """One batch through torch._scaled_mm exactly as the competition calls it (sm_100+ only):
    A [M, K/2], B [N, K/2] fp4 on the GPU, plain scales [M, K/16], [N, K/16] anywhere -> A·Bᵀ [M, N]."""
    return torch._scaled_mm(a, b.transpose(0, 1), to_blocked(sfa).cuda(), to_blocked(sfb).cuda(),
                            bias=None, out_dtype=out_dtype)


def block_scaled_mm(a, b, sfa, sfb, out_dtype=torch.float16) -> torch.Tensor:
    """One batch of A·Bᵀ rounded once to `out_dtype`: the competition's torch._scaled_mm where FP4 tensor
    cores exist, the exact emulation (`scaled_gemm`) everywhere else. Scales may live on the CPU."""
    if has_fp4_tensor_cores(a.device):
        return blackwell_scaled_mm(a, b, sfa, sfb, out_dtype)
    return scaled_gemm(a, b, sfa, sfb).to(out_dtype)
