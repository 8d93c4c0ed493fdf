"""Types for the fp8_attention task (submissions import these names, as in the competition's tasks)."""
from typing import TypedDict, TypeVar

import torch

# (q, k, v, q_scale, k_scale, v_scale, causal, out): q, k, v float8_e4m3fn [B, H, S, D], contiguous; the
# per-tensor scales float32 [1] (real value = fp8 value × scale); causal a bool; out bfloat16 [B, H, S, D],
# pre-filled: write softmax(Q·Kᵀ/√D [masked]) · V into it and return it.
input_t = TypeVar("input_t", bound=tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
                                         torch.Tensor, torch.Tensor, bool, torch.Tensor])
output_t = TypeVar("output_t", bound=torch.Tensor)      # out: [B, H, S, D] bfloat16


class TestSpec(TypedDict):
    b: int
    h: int
    s: int
    d: int
    causal: int
    seed: int
