"""nvfp4_gemv reference: the competition's input contract and result, on any hardware.

`generate_input(m, k, l, seed)` returns (a, b, sfa, sfb, sfa_permuted, sfb_permuted, c):
- a   [M, K/2, L]   float4_e2m1fn_x2, bytes uniform in 0..3 (low nibble codes 0-3, high nibble 0);
- b   [128, K/2, L] the vector is row 0; N is padded to 128 rows as the competition does for
      torch._scaled_mm, and the 127 other rows hold random data too;
- sfa [M, K/16, L], sfb [128, K/16, L] float8_e4m3fn in {0, 1, 2}; the permuted copies
      (32, 4, ceil(rows/128), 4, ceil(K/64), L) have random padding in {0, 1, 2};
- c   [M, 1, L] float16, pre-filled with randn.
On CUDA the random calls are the official generator's, in its order: a, b, c, sfa, sfa padding, sfb,
sfb padding. Extra keyword `data`: "official" (default), "allcodes" or "quantized" (arena/nvfp4/generators.py).
`ref_kernel` writes c[:, 0, l] = A·b and returns c: torch._scaled_mm on sm_100+, exact emulation elsewhere.
"""
import torch

from task import input_t, output_t
from arena.nvfp4 import generators as gen
from arena.taskdef.checking import make_match_reference
from arena.taskdef.tolerance import tolerance_beside
from arena.nvfp4.emulation import blackwell_scaled_mm, has_fp4_tensor_cores, scaled_gemm
from arena.nvfp4.formats import BLOCK_SIZE
from arena.nvfp4.layouts import ceil_div, to_blocked as _blocked  # noqa: F401  (ceil_div: an official name)

sf_vec_size = BLOCK_SIZE    # the competition's names (submissions import them): sf_vec_size, ceil_div, to_blocked


def to_blocked(input_matrix):
    """The competition's helper: [rows, K/16] scales -> flat cuBLAS 128x4 blocked layout. Like the official
    one it does not pad: rows must be a multiple of 128 and K/16 of 4."""
    return _blocked(input_matrix, pad=False)


N_PADDED = 128          # rows of b and sfb


def ref_kernel(data: input_t) -> output_t:
    a, b, sfa, sfb, _, _, c = data
    blackwell = has_fp4_tensor_cores(c.device)
    for l in range(c.shape[2]):
        if blackwell:
            column = blackwell_scaled_mm(a[:, :, l], b[:, :, l], sfa[:, :, l], sfb[:, :, l], torch.float16)[:, 0]
        else:       # only row 0 of b matters: emulate A·b instead of A·Bᵀ over all 128 rows
            column = scaled_gemm(a[:, :, l], b[:1, :, l], sfa[:, :, l], sfb[:1, :, l])[:, 0].to(c.dtype)
        c[:, 0, l] = column
    return c


def generate_input(m: int, k: int, l: int, seed: int, data: str = "official"):
    """The competition's 7-tuple for a batched GEMV; see the module docstring."""
    gen.check_distribution(data)
    device = gen.default_device()
    sf_k = gen.scale_columns(k)
    torch.manual_seed(seed)
    if data == "quantized":
        a, sfa = gen.quantized_operand(l, m, k, device)
        b, sfb = gen.quantized_operand(l, N_PADDED, k, device)
        c = gen.fp16_output(l, m, 1, device)
        return a, b, sfa, sfb, gen.permuted(sfa), gen.permuted(sfb), c
    low, high = (0, 4) if data == "official" else (0, 256)
    a = gen.fp4_operand(l, m, k, device, low, high)
    b = gen.fp4_operand(l, N_PADDED, k, device, low, high)
    c = gen.fp16_output(l, m, 1, device)
    if data == "allcodes":
        sfa, sfb = gen.allcodes_scales(l, m, sf_k, device), gen.allcodes_scales(l, N_PADDED, sf_k, device)
        return a, b, sfa, sfb, gen.permuted(sfa), gen.permuted(sfb), c
    sfa, sfa_permuted = gen.official_scales(l, m, sf_k, 0, 3, device)
    sfb, sfb_permuted = gen.official_scales(l, N_PADDED, sf_k, 0, 3, device)
    return a, b, sfa, sfb, sfa_permuted, sfb_permuted, c


check_implementation = make_match_reference(ref_kernel, **tolerance_beside(__file__))   # task.yml `tolerance`
