"""nvfp4_dual_gemm reference: the competition's input contract and result, on any hardware.

`generate_input(m, n, k, l, seed)` returns the 10-tuple
(a, b1, b2, sfa, sfb1, sfb2, sfa_permuted, sfb1_permuted, sfb2_permuted, c):
- a [M, K/2, L], b1 and b2 [N, K/2, L] float4_e2m1fn_x2; bytes `randint(0, 255) & 0xBB`, i.e. codes
  {0-3, 8-11} = {0, ±0.5, ±1, ±1.5} on both nibbles;
- sfa [M, K/16, L], sfb1, sfb2 [N, K/16, L] float8_e4m3fn from `rand` (values in [0, 1], subnormals and
  a few zeros); permuted copies (32, 4, ceil(rows/128), 4, ceil(K/64), L). The competition leaves their
  padding uninitialised (`torch.empty`); here it holds 1.0 and costs no random call. The official shapes
  have M, N multiples of 128 and K of 256, so there is no padding;
- c [M, N, L] float16, pre-filled with randn (the reference does not use it).
On CUDA the random calls are the official generator's, in its order: a, b1, b2, c, sfa, sfb1, sfb2.
Extra keyword `data`: "official" (default) or "quantized" (arena/nvfp4/generators.py); "allcodes" would overflow
fp16 in silu(x)·y and is not offered.

`ref_kernel` returns a NEW tensor silu(A·B1ᵀ) * (A·B2ᵀ): both products in fp32 (torch._scaled_mm with
out_dtype=float32 on sm_100+, exact emulation rounded once to fp32 elsewhere), silu and the multiply in
fp32, then one rounding to fp16. Rounding either product to fp16 first fails the 1e-3 tolerance.
"""
import torch

from task import input_t, output_t
from arena.nvfp4 import generators as gen
from arena.taskdef.checking import make_match_reference
from arena.taskdef.tolerance import tolerance_beside
from arena.nvfp4.emulation import block_scaled_mm
from arena.nvfp4.formats import BLOCK_SIZE
from arena.nvfp4.layouts import ceil_div, to_blocked as _blocked  # noqa: F401  (ceil_div: an official name)


sf_vec_size = BLOCK_SIZE    # the competition's names (submissions import them): sf_vec_size, ceil_div, to_blocked


def to_blocked(input_matrix):
    """The competition's helper: [rows, K/16] scales -> flat cuBLAS 128x4 blocked layout. Like the official
    one it does not pad: rows must be a multiple of 128 and K/16 of 4."""
    return _blocked(input_matrix, pad=False)


def ref_kernel(data: input_t) -> output_t:
    a, b1, b2, sfa, sfb1, sfb2, _, _, _, c = data
    m, n, l = c.shape
    gate = torch.empty((l, m, n), dtype=torch.float32, device=c.device).permute(1, 2, 0)
    up = torch.empty_like(gate)
    for i in range(l):
        gate[:, :, i] = block_scaled_mm(a[:, :, i], b1[:, :, i], sfa[:, :, i], sfb1[:, :, i], torch.float32)
        up[:, :, i] = block_scaled_mm(a[:, :, i], b2[:, :, i], sfa[:, :, i], sfb2[:, :, i], torch.float32)
    return (torch.nn.functional.silu(gate) * up).to(torch.float16)


def generate_input(m: int, n: int, k: int, l: int, seed: int, data: str = "official"):
    """The competition's 10-tuple for the dual GEMM; see the module docstring."""
    gen.check_distribution(data)
    if data == "allcodes":
        raise ValueError("data 'allcodes' is not offered for dual gemm (silu(x)*y overflows fp16): "
                         "use official or quantized")
    device = gen.default_device()
    sf_k = gen.scale_columns(k)
    torch.manual_seed(seed)
    if data == "quantized":
        a, sfa = gen.quantized_operand(l, m, k, device)
        b1, sfb1 = gen.quantized_operand(l, n, k, device)
        b2, sfb2 = gen.quantized_operand(l, n, k, device)
        c = gen.fp16_output(l, m, n, device)
    else:
        a = gen.fp4_operand(l, m, k, device, 0, 255, mask=gen.SIGN_AND_LOW_BITS)
        b1 = gen.fp4_operand(l, n, k, device, 0, 255, mask=gen.SIGN_AND_LOW_BITS)
        b2 = gen.fp4_operand(l, n, k, device, 0, 255, mask=gen.SIGN_AND_LOW_BITS)
        c = gen.fp16_output(l, m, n, device)
        sfa = gen.uniform_scales(l, m, sf_k, device)
        sfb1 = gen.uniform_scales(l, n, sf_k, device)
        sfb2 = gen.uniform_scales(l, n, sf_k, device)
    return (a, b1, b2, sfa, sfb1, sfb2, gen.permuted(sfa), gen.permuted(sfb1), gen.permuted(sfb2), c)


check_implementation = make_match_reference(ref_kernel, **tolerance_beside(__file__))   # task.yml `tolerance`
