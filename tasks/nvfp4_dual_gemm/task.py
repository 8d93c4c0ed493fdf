"""Types for the nvfp4_dual_gemm task, with the names the competition's files use (submissions import these)."""
from typing import TypedDict, TypeVar

import torch

# (a, b1, b2, sfa, sfb1, sfb2, sfa_permuted, sfb1_permuted, sfb2_permuted, c): ten tensors.
input_t = TypeVar("input_t", bound=tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
                                         torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor])
output_t = TypeVar("output_t", bound=torch.Tensor)      # [M, N, L] fp16


class TestSpec(TypedDict):
    m: int
    n: int
    k: int
    l: int
    seed: int
