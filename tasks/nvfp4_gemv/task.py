"""Types for the nvfp4_gemv task, with the names the competition's files use (submissions import these)."""
from typing import TypedDict, TypeVar

import torch

# (a, b, sfa, sfb, sfa_permuted, sfb_permuted, c); b and sfb hold 128 rows, only row 0 is the vector.
input_t = TypeVar("input_t", bound=tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
                                         torch.Tensor, torch.Tensor, torch.Tensor])
output_t = TypeVar("output_t", bound=torch.Tensor)      # c: [M, 1, L] fp16


class TestSpec(TypedDict):
    m: int
    k: int
    l: int
    seed: int
