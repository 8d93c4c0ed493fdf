"""A correct pure-PyTorch submission for fp8_attention that runs anywhere (CPU, Hopper, Blackwell).

Dequantizes Q, K, V exactly (fp8 × a power-of-two scale), then attention in fp32 (TF32 off) with a stable
softmax, one bf16 rounding at the end. One head at a time, so the S×S scores of a long sequence stay small.
"""
import math

import torch

from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    q8, k8, v8, q_scale, k_scale, v_scale, causal, out = data
    b, h, s, d = q8.shape
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        hidden = torch.ones(s, s, dtype=torch.bool, device=q8.device).triu(1) if causal else None
        for i in range(b):
            q = q8[i].float() * q_scale
            k = k8[i].float() * k_scale
            v = v8[i].float() * v_scale
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d)
            if hidden is not None:
                scores = scores.masked_fill(hidden, float("-inf"))
            out[i] = torch.matmul(torch.softmax(scores, dim=-1), v).to(out.dtype)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    return out
