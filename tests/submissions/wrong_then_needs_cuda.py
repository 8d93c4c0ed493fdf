"""Wrong (all zeros) on the first small case, GPU-only on the second: one failure beside one case not run."""
import torch


def custom_kernel(data):
    a, b, sfa, sfb, sfa_permuted, sfb_permuted, c = data
    if c.shape[1] == 256:
        return torch.zeros_like(c)
    return c.cuda()
