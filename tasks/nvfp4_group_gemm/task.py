"""Types for the nvfp4_group_gemm task, with the names the competition's files use (submissions import these)."""
from typing import TypedDict, TypeVar

import torch

# (abc_tensors, sfasfb_tensors, sfasfb_reordered_tensors, problem_sizes): per-group lists of (a, b, c),
# (sfa, sfb) on the CPU, (sfa_reordered, sfb_reordered) on the GPU, and (M, N, K, L) with L = 1.
input_t = TypeVar("input_t", bound=tuple[list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]],
                                         list[tuple[torch.Tensor, torch.Tensor]],
                                         list[tuple[torch.Tensor, torch.Tensor]],
                                         list[tuple[int, int, int, int]]])
output_t = TypeVar("output_t", bound=list[torch.Tensor])    # one [M_i, N_i, 1] fp16 tensor per group


class TestSpec(TypedDict):
    m: tuple[int, ...]
    n: tuple[int, ...]
    k: tuple[int, ...]
    g: int
    seed: int
