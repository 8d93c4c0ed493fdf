"""nvfp4_gemm reference: the competition's input contract and result, on any hardware.

- `generate_input(m, n, k, l, seed)` makes the competition's 7-tuple with the same dtypes, shapes, strides
  and value distributions; on CUDA it makes the same random calls in the same order, so a seed gives the
  same tensors as the official generator. Extra keyword `data` picks other distributions for robustness
  runs: "official" (default), "quantized" (real NVFP4 quantization of Gaussian data: fractional scales),
  "allcodes" (every fp4 code on both operands and a wide range of e4m3 scales, subnormals included).
- `ref_kernel` calls `torch._scaled_mm` on Blackwell (sm_100+), exactly as the competition does, and an exact
  emulation elsewhere (arena/emulation.py).
"""
import torch

from task import input_t, output_t
from arena.checking import make_match_reference
from arena.emulation import fp4_gemm_reference, has_fp4_tensor_cores
from arena.formats import BLOCK_SIZE, quantize_nvfp4
from arena.layouts import ceil_div, to_blocked, to_permuted

sf_vec_size = BLOCK_SIZE


def ref_kernel(data: input_t) -> output_t:
    a, b, sfa, sfb, _, _, c = data
    if not has_fp4_tensor_cores(c.device):
        return fp4_gemm_reference(a, b, sfa, sfb, c)
    for l in range(c.shape[2]):
        c[:, :, l] = torch._scaled_mm(
            a[:, :, l], b[:, :, l].transpose(0, 1),
            to_blocked(sfa[:, :, l]).cuda(), to_blocked(sfb[:, :, l]).cuda(),
            bias=None, out_dtype=torch.float16,
        )
    return c


def _device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def _official_scales(l: int, mn: int, sf_k: int, device: str):
    """Scales in {0, 1, 2, 3} (plain [mn, sf_k, l]) and their permuted copy, whose padding is random too."""
    plain = torch.randint(0, 4, (l, mn, sf_k), dtype=torch.int8, device=device)
    plain = plain.to(torch.float8_e4m3fn).permute(1, 2, 0)
    padding = torch.randint(0, 4, (l, ceil_div(mn, 128), ceil_div(sf_k, 4), 32, 4, 4), dtype=torch.int8, device=device)
    return plain, to_permuted(plain, padding.to(torch.float8_e4m3fn))


def _allcodes_scales(l: int, mn: int, sf_k: int, device: str):
    """e4m3 bytes 0x01..0x57: subnormals (2^-9 ...) up to 15, every mantissa; no zeros, no NaN."""
    plain = torch.randint(1, 0x58, (l, mn, sf_k), dtype=torch.uint8, device=device)
    plain = plain.view(torch.float8_e4m3fn).permute(1, 2, 0)
    return plain, to_permuted(plain)


def _quantized_operand(l: int, rows: int, k: int, device: str):
    """Gaussian rows with per-row magnitude spread, quantized as NVFP4 models do."""
    x = torch.randn((l, rows, k), device=device) * torch.rand((l, rows, 1), device=device).add(0.1)
    packed, scales = zip(*(quantize_nvfp4(x[i]) for i in range(l)))
    raw = torch.stack([p.view(torch.uint8) for p in packed])      # stack is not defined for fp4 dtypes
    values = raw.permute(1, 2, 0).view(torch.float4_e2m1fn_x2)
    plain = torch.stack([s.view(torch.uint8) for s in scales]).view(torch.float8_e4m3fn).permute(1, 2, 0)
    return values, plain, to_permuted(plain)


def generate_input(m: int, n: int, k: int, l: int, seed: int, data: str = "official"):
    """The competition's (a, b, sfa, sfb, sfa_permuted, sfb_permuted, c); see the module docstring."""
    device = _device()
    torch.manual_seed(seed)
    if data == "quantized":
        a, sfa, sfa_perm = _quantized_operand(l, m, k, device)
        b, sfb, sfb_perm = _quantized_operand(l, n, k, device)
        c = torch.randn((l, m, n), dtype=torch.float16, device=device).permute(1, 2, 0)
        return a, b, sfa, sfb, sfa_perm, sfb_perm, c
    if data not in ("official", "allcodes"):
        raise ValueError(f"unknown data distribution {data!r}: use official, quantized or allcodes")
    # Bytes uniform over -128..127: all 16 codes on both nibbles.
    a = torch.randint(-128, 128, (l, m, k // 2), dtype=torch.int8, device=device).permute(1, 2, 0)
    b = torch.randint(-128, 128, (l, n, k // 2), dtype=torch.int8, device=device).permute(1, 2, 0)
    a, b = a.view(torch.float4_e2m1fn_x2), b.view(torch.float4_e2m1fn_x2)
    c = torch.randn((l, m, n), dtype=torch.float16, device=device).permute(1, 2, 0)
    make_scales = _official_scales if data == "official" else _allcodes_scales
    sf_k = ceil_div(k, sf_vec_size)
    sfa, sfa_perm = make_scales(l, m, sf_k, device)
    sfb, sfb_perm = make_scales(l, n, sf_k, device)
    return a, b, sfa, sfb, sfa_perm, sfb_perm, c


check_implementation = make_match_reference(ref_kernel, rtol=1e-03, atol=1e-03)
