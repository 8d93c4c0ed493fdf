"""nvfp4_gemm reference: the competition's input contract and result, on any hardware.

- `generate_input(m, n, k, l, seed)` makes the competition's 7-tuple with the same dtypes, shapes, strides
  and value distributions; on CUDA it makes the same random calls in the same order, so a seed gives the
  same tensors as the official generator. Extra keyword `data` picks other distributions for robustness
  runs: "official" (default), "quantized" (real NVFP4 quantization of Gaussian data: fractional scales),
  "allcodes" (every fp4 code on both operands and a wide range of e4m3 scales, subnormals included).
- `ref_kernel` calls `torch._scaled_mm` on Blackwell (sm_100+), exactly as the competition does, and an exact
  emulation elsewhere (arena/nvfp4/emulation.py).
- `sf_vec_size`, `ceil_div` and `to_blocked` are the competition's helpers, which submissions import.
"""
import torch

from task import input_t, output_t
from arena.nvfp4 import generators as gen
from arena.taskdef.checking import make_match_reference
from arena.taskdef.tolerance import tolerance_beside
from arena.nvfp4.emulation import blackwell_scaled_mm, fp4_gemm_reference, has_fp4_tensor_cores
from arena.nvfp4.formats import BLOCK_SIZE
from arena.nvfp4.layouts import ceil_div, to_blocked as _blocked  # noqa: F401  (ceil_div: an official name)

sf_vec_size = BLOCK_SIZE


def to_blocked(input_matrix):
    """The competition's helper: [rows, K/16] scales -> flat cuBLAS 128x4 blocked layout. Like the official
    one it does not pad: rows must be a multiple of 128 and K/16 of 4."""
    return _blocked(input_matrix, pad=False)


def ref_kernel(data: input_t) -> output_t:
    a, b, sfa, sfb, _, _, c = data
    if not has_fp4_tensor_cores(c.device):
        return fp4_gemm_reference(a, b, sfa, sfb, c)
    for l in range(c.shape[2]):
        c[:, :, l] = blackwell_scaled_mm(a[:, :, l], b[:, :, l], sfa[:, :, l], sfb[:, :, l])
    return c


def generate_input(m: int, n: int, k: int, l: int, seed: int, data: str = "official"):
    """The competition's (a, b, sfa, sfb, sfa_permuted, sfb_permuted, c); see the module docstring."""
    gen.check_distribution(data)
    device = gen.default_device()
    torch.manual_seed(seed)
    sf_k = gen.scale_columns(k)
    if data == "quantized":
        a, sfa = gen.quantized_operand(l, m, k, device)
        b, sfb = gen.quantized_operand(l, n, k, device)
        c = gen.fp16_output(l, m, n, device)
        return a, b, sfa, sfb, gen.permuted(sfa), gen.permuted(sfb), c
    # Bytes uniform over -128..127: all 16 codes on both nibbles. Random calls in the competition's order.
    a = gen.fp4_operand(l, m, k, device, -128, 128, torch.int8)
    b = gen.fp4_operand(l, n, k, device, -128, 128, torch.int8)
    c = gen.fp16_output(l, m, n, device)
    if data == "allcodes":
        sfa, sfb = gen.allcodes_scales(l, m, sf_k, device), gen.allcodes_scales(l, n, sf_k, device)
        return a, b, sfa, sfb, gen.permuted(sfa), gen.permuted(sfb), c
    # Official: scales in {0, 1, 2, 3}; the permuted copy's padding is random too.
    sfa, sfa_perm = gen.official_scales(l, m, sf_k, 0, 4, device)
    sfb, sfb_perm = gen.official_scales(l, n, sf_k, 0, 4, device)
    return a, b, sfa, sfb, sfa_perm, sfb_perm, c


check_implementation = make_match_reference(ref_kernel, **tolerance_beside(__file__))   # task.yml `tolerance`
