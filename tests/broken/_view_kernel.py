"""A pure-PyTorch nvfp4_gemm that rebuilds the [MN, K/16] scales from the 6-D permuted view
sf_permuted[r % 32, (r % 128) // 32, r // 128, k % 4, k // 4, l] with one `permute`, as many submissions do.
`run(data, order)` is right for order (2, 1, 0, 4, 3, 5); each file beside this one passes one wrong order."""
import torch
from _kernel import fp4_values

RIGHT = (2, 1, 0, 4, 3, 5)      # rows as (row tile, 32-row group, row in group), K as (K tile, position)


def plain_scales(perm: torch.Tensor, mn: int, sk: int, order, dtype) -> torch.Tensor:
    view = perm.to(dtype).permute(*order)
    rows, ks = view.shape[0] * view.shape[1] * view.shape[2], view.shape[3] * view.shape[4]
    return view.reshape(rows, ks, view.shape[5])[:mn, :sk]


def run(data, order=RIGHT):
    a, b, sfa, sfb, sfa_perm, sfb_perm, c = data
    dtype = torch.float64 if c.device.type == "cpu" else torch.float32
    m, n, l = c.shape
    sk = a.shape[1] * 2 // 16
    sa, sb = plain_scales(sfa_perm, m, sk, order, dtype), plain_scales(sfb_perm, n, sk, order, dtype)
    for batch in range(l):
        av = fp4_values(a[:, :, batch], dtype) * sa[:, :, batch].repeat_interleave(16, dim=1)
        bv = fp4_values(b[:, :, batch], dtype) * sb[:, :, batch].repeat_interleave(16, dim=1)
        c[:, :, batch] = (av @ bv.T).to(c.dtype)
    return c
