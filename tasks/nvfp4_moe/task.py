"""Types for the nvfp4_moe task (submissions import these names, as in the competition's tasks)."""
from typing import TypedDict, TypeVar

import torch

# (x, topk_ids, topk_weights, w1, w1_sf, w1_sf_blocked, w1_gs, w2, w2_sf, w2_sf_blocked, w2_gs, a1_gs, a2_gs, out)
# x bf16 [T, H]; topk_ids int32 [T, K]; topk_weights fp32 [T, K]; w1 float4_e2m1fn_x2 [E, 2I, H/2] (gate rows
# 0..I-1, up rows I..2I-1); w1_sf float8_e4m3fn [E, 2I, H/16]; w1_sf_blocked [E, *] the same scales in the
# cuBLAS 128x4 blocked layout per expert; w1_gs fp32 [E]; w2 [E, H, I/2], w2_sf [E, H, I/16], w2_sf_blocked,
# w2_gs [E]; a1_gs, a2_gs fp32 [1]: the global scales of the activations and of the intermediate; out bf16
# [T, H], pre-filled. Real value of an NVFP4 element = e2m1 × e4m3 block scale × global scale.
input_t = TypeVar("input_t", bound=tuple)
output_t = TypeVar("output_t", bound=torch.Tensor)      # out: [T, H] bfloat16


class TestSpec(TypedDict):
    t: int
    h: int
    i: int
    e: int
    k: int
    seed: int
