"""NVFP4 `torch._scaled_mm` where there are no FP4 tensor cores (a CPU, Hopper and older): exact emulation.

The competition's reference, its gemv example and many submissions call
`torch._scaled_mm(a, b.T, to_blocked(sfa), to_blocked(sfb), bias=None, out_dtype=torch.float16)` with
float4_e2m1fn_x2 operands and e4m3 scales in the cuBLAS 128x4 blocked layout. cuBLAS runs that only on
sm_100+. The worker calls `install()` before it imports the submission: `torch._scaled_mm` becomes a wrapper
that checks NVFP4 calls as torch does and computes them exactly as the reference (arena/nvfp4/emulation.py) does,
bit for bit; every other call goes to the original function unchanged.

The computation is the custom op `nvfp4_arena::scaled_mm` with a fake implementation, so a submission that
wraps its call in `torch.compile` traces it as one opaque node (dynamo inlines the Python wrapper).
Calls through `torch.ops.aten._scaled_mm` or from C++ are not intercepted.
"""
from __future__ import annotations

from typing import Optional

import torch

from arena.nvfp4.emulation import scaled_gemm
from arena.nvfp4.formats import BLOCK_SIZE
from arena.nvfp4.layouts import COLS_PER_TILE, ROWS_PER_TILE, ceil_div, from_blocked

ANNOUNCEMENT = "emulated torch._scaled_mm: times are not comparable"
FP4 = torch.float4_e2m1fn_x2
OUT_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
# torch._scaled_mm's parameters in order (native_functions.yaml); `out` is keyword-only.
_PARAMS = ("self", "mat2", "scale_a", "scale_b", "bias", "scale_result", "out_dtype", "use_fast_accum")

_original = None        # the real torch._scaled_mm while the wrapper is installed
calls = 0               # NVFP4 calls emulated so far: the worker announces emulation once there was one


def _scale_entries(rows: int, k_packed: int) -> int:
    """Blocked e4m3 scales torch expects for `rows` x (2 * k_packed) fp4 values: rows and K/16 padded to 128 x 4."""
    scale_cols = ceil_div(2 * k_packed, BLOCK_SIZE)
    return ceil_div(rows, ROWS_PER_TILE) * ROWS_PER_TILE * ceil_div(scale_cols, COLS_PER_TILE) * COLS_PER_TILE


def _check(a, b, scale_a, scale_b, bias, out_dtype) -> None:
    """The checks torch makes for NVFP4 (ScaledBlas.cpp, _meta_registrations.py), with torch's wording."""
    if a.dim() != 2 or b.dim() != 2:
        raise RuntimeError(f"torch._scaled_mm: inputs must be 2D but got self.dim()={a.dim()} and mat2.dim()={b.dim()}")
    if a.dtype != FP4 or b.dtype != FP4:
        raise RuntimeError(f"torch._scaled_mm with NVFP4 scales needs float4_e2m1fn_x2 for both inputs, "
                           f"got self.dtype={a.dtype} and mat2.dtype={b.dtype}")
    m, k_packed = a.shape
    n = b.shape[1]
    if b.shape[0] != k_packed:
        raise RuntimeError(f"torch._scaled_mm: mat1 and mat2 shapes cannot be multiplied "
                           f"({m}x{k_packed} and {b.shape[0]}x{n})")
    # cuBLAS takes fp4 only as row-major A times column-major B (pass b.T of a row-major [N, K/2]).
    if a.numel() and not (a.stride(1) == 1 and a.stride(0) > 1):
        raise RuntimeError(f"torch._scaled_mm: self must be row_major, got stride {a.stride()}")
    if b.numel() and not (b.stride(0) == 1 and b.stride(1) > 1):
        raise RuntimeError(f"torch._scaled_mm: mat2 must be col_major, got stride {b.stride()} "
                           f"(pass b.transpose(0, 1) of a row-major [N, K/2] tensor)")
    if k_packed % 16:
        raise RuntimeError(f"torch._scaled_mm: expected trailing dimension of mat1 to be divisible by 16 "
                           f"but got mat1 shape: ({m}x{k_packed})")
    if b.shape[0] % 16 or n % 16:
        raise RuntimeError(f"torch._scaled_mm: mat2 shape ({b.shape[0]}x{n}) must be divisible by 16")
    want_a, want_b = _scale_entries(m, k_packed), _scale_entries(n, k_packed)
    for name, scale in (("scale_a", scale_a), ("scale_b", scale_b)):
        if scale.dtype != torch.float8_e4m3fn:
            raise RuntimeError(f"torch._scaled_mm: NVFP4 needs float8_e4m3fn scales for both inputs, "
                               f"got {name}.dtype={scale.dtype}")
    if scale_a.numel() != want_a or scale_b.numel() != want_b or not scale_a.is_contiguous() \
            or not scale_b.is_contiguous():
        raise RuntimeError(
            f"torch._scaled_mm: invalid NVFP4 scales: for Blockwise 1x16 scaling scale_a should have {want_a} "
            f"elements and scale_b should have {want_b} elements (rows padded to 128, K/16 to 4, in the blocked "
            f"layout of to_blocked), and both should be contiguous. Got scale_a.size()={tuple(scale_a.shape)}, "
            f"scale_a.stride()={scale_a.stride()}, scale_b.size()={tuple(scale_b.shape)}, "
            f"scale_b.stride()={scale_b.stride()}")
    if out_dtype not in OUT_DTYPES:
        raise RuntimeError(f"torch._scaled_mm: the emulated NVFP4 path writes float16, bfloat16 or float32; "
                           f"got out_dtype={out_dtype}")
    if bias is not None:
        if out_dtype == torch.float32:
            raise RuntimeError("torch._scaled_mm: Bias is not supported when out_dtype is set to Float32")
        if bias.dtype != out_dtype:
            raise RuntimeError(f"torch._scaled_mm: Bias must be {out_dtype} to compute {out_dtype} output, "
                               f"but got {bias.dtype}")
        if bias.numel() != n:
            raise RuntimeError(f"torch._scaled_mm: Bias must be size {n} but got {bias.numel()}")
    tensors = [t for t in (a, b, scale_a, scale_b, bias) if t is not None]
    if any(t.device != a.device for t in tensors):
        raise RuntimeError(f"torch._scaled_mm: expected all tensors on one device, got "
                           f"{', '.join(str(t.device) for t in tensors)}")


@torch.library.custom_op("nvfp4_arena::scaled_mm", mutates_args=())
def _emulated(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
              bias: Optional[torch.Tensor], out_dtype: torch.dtype) -> torch.Tensor:
    """A [M, K/2] fp4 row-major times B [K/2, N] fp4 column-major, blocked scales -> [M, N] in out_dtype."""
    _check(a, b, scale_a, scale_b, bias, out_dtype)
    scale_cols = 2 * a.shape[1] // BLOCK_SIZE
    sfa = from_blocked(scale_a.reshape(-1), a.shape[0], scale_cols)
    sfb = from_blocked(scale_b.reshape(-1), b.shape[1], scale_cols)
    product = scaled_gemm(a, b.t(), sfa, sfb)       # exactly the reference's sum, unrounded
    if bias is None:
        return product.to(out_dtype)                # one rounding, as the reference does
    # cuBLAS adds the bias in its fp32 epilogue, then rounds to the output type.
    return (product.float() + bias.float()).to(out_dtype)


@_emulated.register_fake
def _emulated_fake(a, b, scale_a, scale_b, bias, out_dtype):
    _check(a, b, scale_a, scale_b, bias, out_dtype)
    return a.new_empty((a.shape[0], b.shape[1]), dtype=out_dtype)


def _is_nvfp4(values: dict) -> bool:
    """fp4 operands with e4m3 scales (MXFP4 has e8m0 scales and stays with torch)."""
    def has(name, dtype):
        return isinstance(values.get(name), torch.Tensor) and values[name].dtype == dtype
    return (has("self", FP4) or has("mat2", FP4)) and \
        (has("scale_a", torch.float8_e4m3fn) or has("scale_b", torch.float8_e4m3fn))


def _scaled_mm(*args, **kwargs):
    """torch._scaled_mm, with NVFP4 calls emulated exactly (arena/nvfp4/scaled_mm_emulation.py)."""
    values = dict(zip(_PARAMS, args))
    values.update(kwargs)
    if not _is_nvfp4(values):
        return _original(*args, **kwargs)
    if len(args) > len(_PARAMS) or set(kwargs) - set(_PARAMS) - {"out"} or \
            any(p not in values for p in _PARAMS[:4]):
        raise TypeError(f"torch._scaled_mm() takes ({', '.join(_PARAMS)}, *, out=None); "
                        f"got {len(args)} positional arguments and keywords {sorted(kwargs)}")
    global calls
    calls += 1
    if values.get("use_fast_accum"):
        raise RuntimeError("torch._scaled_mm: `use_fast_accum` is not supported when `mat1` or `mat2` tensors "
                           "have the `Float4_e2m1fn_x2` dtype.")
    scale_result = values.get("scale_result")
    # Like torch, a scale_result is checked but only applies to float8 outputs, which NVFP4 here never has.
    if scale_result is not None and (scale_result.numel() != 1 or scale_result.dtype != torch.float32):
        raise RuntimeError("torch._scaled_mm: scale_result must be a float scalar")
    out = kwargs.get("out")
    out_dtype = values.get("out_dtype")
    if out is not None and out_dtype is not None and out.dtype != out_dtype:
        raise RuntimeError("torch._scaled_mm: out_dtype must match output matrix type")
    if out_dtype is None:       # torch defaults to the input's dtype, which no fp4 GEMM can write
        out_dtype = out.dtype if out is not None else values["self"].dtype
    result = _emulated(values["self"], values["mat2"], values["scale_a"], values["scale_b"],
                       values.get("bias"), out_dtype)
    if out is None:
        return result
    out.resize_(result.shape).copy_(result)
    return out


def install(device_capability: tuple | None) -> str | None:
    """Emulate NVFP4 torch._scaled_mm on a CPU (None) or a GPU below sm_100; return the one-line
    announcement, or None where FP4 tensor cores exist and nothing was installed."""
    global _original
    if device_capability is not None and tuple(device_capability) >= (10, 0):
        return None
    if _original is None:
        _original = torch._scaled_mm
        torch._scaled_mm = _scaled_mm
    return ANNOUNCEMENT


def uninstall() -> None:
    """Put the original torch._scaled_mm back (tests)."""
    global _original
    if _original is not None:
        torch._scaled_mm = _original
        _original = None
