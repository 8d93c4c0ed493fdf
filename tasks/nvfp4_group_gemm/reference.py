"""nvfp4_group_gemm reference: the competition's input contract and result, on any hardware.

`generate_input(m, n, k, g, seed)` takes per-group sizes (`m: [80, 176]; n: [4096, 4096]; k: [7168, 7168];
g: 2`) and returns (abc_tensors, sfasfb_tensors, sfasfb_reordered_tensors, problem_sizes), lists of G:
- (a [M, K/2, 1], b [N, K/2, 1]) float4_e2m1fn_x2 with bytes `randint(0, 255) & 0xBB` (codes {0-3, 8-11}),
  c [M, N, 1] float16 pre-filled with randn, all on the GPU;
- (sfa [M, K/16, 1], sfb [N, K/16, 1]) float8_e4m3fn in {1, 2}, on the CPU, as in the competition;
- (sfa_reordered, sfb_reordered) (32, 4, ceil(rows/128), 4, ceil(K/64), 1) on the GPU. M is irregular
  (40, 56, 72, ...): rows past M are padding, and the padding is random {1, 2} as in the official generator;
- (M, N, K, 1).
Random calls per group, in the official order: a, b, c (device), sfa, sfb (CPU generator), sfa padding,
sfb padding (device). Extra keyword `data`: "official" (default), "allcodes" or "quantized".

`ref_kernel` writes c_i = A_i·B_iᵀ into each group's c and returns the list: torch._scaled_mm on sm_100+,
exact emulation elsewhere. The check covers the list's length and every group's dtype, shape and device.
"""
import torch

from task import input_t, output_t
from arena import generators as gen
from arena.checking import make_match_reference
from arena.emulation import block_scaled_mm

L = 1       # every group has one batch


def ref_kernel(data: input_t) -> output_t:
    abc_tensors, sfasfb_tensors, _, problem_sizes = data
    results = []
    for (a, b, c), (sfa, sfb), (_, _, _, l) in zip(abc_tensors, sfasfb_tensors, problem_sizes):
        for i in range(l):
            c[:, :, i] = block_scaled_mm(a[:, :, i], b[:, :, i], sfa[:, :, i], sfb[:, :, i], torch.float16)
        results.append(c)
    return results


def _sizes(m, n, k, g) -> list[tuple[int, int, int]]:
    lists = {"m": m, "n": n, "k": k}
    for name, values in lists.items():
        if isinstance(values, int) or len(values) != g:
            raise ValueError(f"{name} must list one size per group (g = {g}), got {values!r}")
    return list(zip(m, n, k))


def generate_input(m: tuple, n: tuple, k: tuple, g: int, seed: int, data: str = "official"):
    """The competition's grouped input; see the module docstring."""
    gen.check_distribution(data)
    device = gen.default_device()
    torch.manual_seed(seed)
    abc_tensors, sfasfb_tensors, reordered_tensors, problem_sizes = [], [], [], []
    for mi, ni, ki in _sizes(m, n, k, g):
        sf_k = gen.scale_columns(ki)
        if data == "quantized":
            a, sfa = gen.quantized_operand(L, mi, ki, device)
            b, sfb = gen.quantized_operand(L, ni, ki, device)
            c = gen.fp16_output(L, mi, ni, device)
            sfa, sfb = sfa.cpu(), sfb.cpu()
            reordered = (gen.permuted(sfa, device=device), gen.permuted(sfb, device=device))
        elif data == "allcodes":
            a = gen.fp4_operand(L, mi, ki, device, 0, 256)
            b = gen.fp4_operand(L, ni, ki, device, 0, 256)
            c = gen.fp16_output(L, mi, ni, device)
            sfa, sfb = gen.allcodes_scales(L, mi, sf_k, "cpu"), gen.allcodes_scales(L, ni, sf_k, "cpu")
            reordered = (gen.permuted(sfa, device=device), gen.permuted(sfb, device=device))
        else:
            a = gen.fp4_operand(L, mi, ki, device, 0, 255, mask=gen.SIGN_AND_LOW_BITS)
            b = gen.fp4_operand(L, ni, ki, device, 0, 255, mask=gen.SIGN_AND_LOW_BITS)
            c = gen.fp16_output(L, mi, ni, device)
            sfa = gen.int_scales(L, mi, sf_k, 1, 3, "cpu")
            sfb = gen.int_scales(L, ni, sf_k, 1, 3, "cpu")
            sfa_reordered = gen.permuted(sfa, gen.int_padding(L, mi, sf_k, 1, 3, device))
            sfb_reordered = gen.permuted(sfb, gen.int_padding(L, ni, sf_k, 1, 3, device))
            reordered = (sfa_reordered, sfb_reordered)
        abc_tensors.append((a, b, c))
        sfasfb_tensors.append((sfa, sfb))
        reordered_tensors.append(reordered)
        problem_sizes.append((mi, ni, ki, L))
    return abc_tensors, sfasfb_tensors, reordered_tensors, problem_sizes


check_implementation = make_match_reference(ref_kernel, rtol=1e-03, atol=1e-03)
