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

The competition's helpers, which submissions import, have its names and behaviour: `sf_vec_size`,
`ceil_div`, `to_blocked` (pads irregular shapes with zeros, as this task's official one does),
`create_reordered_scale_factor_tensor` and `_create_fp4_tensors` (same random calls).
"""
import torch

from task import input_t, output_t
from arena.nvfp4 import generators as gen
from arena.taskdef.checking import make_match_reference
from arena.taskdef.tolerance import tolerance_beside
from arena.nvfp4.emulation import block_scaled_mm
from arena.nvfp4.formats import BLOCK_SIZE
from arena.nvfp4.layouts import ceil_div, to_blocked as _blocked  # noqa: F401  (ceil_div: an official name)

L = 1       # every group has one batch
sf_vec_size = BLOCK_SIZE


def to_blocked(input_matrix):
    """The competition's helper: [rows, K/16] scales -> flat cuBLAS 128x4 blocked layout, padded to 128 rows
    and 4 columns with zeros (this task's official helper pads with 0, the others cannot pad)."""
    return _blocked(input_matrix, pad=True, fill=0.0)


def create_reordered_scale_factor_tensor(l: int, mn: int, k: int, ref_f8_tensor: torch.Tensor) -> torch.Tensor:
    """The competition's helper: plain scales [mn, K/16, l] -> the permuted (32, 4, ceil(mn/128), 4,
    ceil(K/64), l) copy on the GPU (the CPU here without one), padding random in {1, 2} from one randint."""
    device = gen.default_device()
    sf_k = gen.scale_columns(k)
    return gen.permuted(ref_f8_tensor[:mn, :sf_k, :l], gen.int_padding(l, mn, sf_k, 1, 3, device))


def _create_fp4_tensors(l: int, mn: int, k: int) -> torch.Tensor:
    """The competition's helper: one randint of bytes masked to codes {0-3, 8-11}, as fp4x2 [mn, K/2, l]."""
    return gen.fp4_operand(l, mn, k, gen.default_device(), 0, 255, mask=gen.SIGN_AND_LOW_BITS)


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
            a, b = _create_fp4_tensors(L, mi, ki), _create_fp4_tensors(L, ni, ki)
            c = gen.fp16_output(L, mi, ni, device)
            sfa = gen.int_scales(L, mi, sf_k, 1, 3, "cpu")
            sfb = gen.int_scales(L, ni, sf_k, 1, 3, "cpu")
            reordered = (create_reordered_scale_factor_tensor(L, mi, ki, sfa),
                         create_reordered_scale_factor_tensor(L, ni, ki, sfb))
        abc_tensors.append((a, b, c))
        sfasfb_tensors.append((sfa, sfb))
        reordered_tensors.append(reordered)
        problem_sizes.append((mi, ni, ki, L))
    return abc_tensors, sfasfb_tensors, reordered_tensors, problem_sizes


check_implementation = make_match_reference(ref_kernel, **tolerance_beside(__file__))   # task.yml `tolerance`
