"""fp8_attention: the right answer off by a uniform 1 %."""
import torch

from _attention import run


def custom_kernel(data):
    out = run(data)
    out.copy_((out.float() * 1.01).to(torch.bfloat16))
    return out
