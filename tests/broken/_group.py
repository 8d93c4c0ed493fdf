"""A pure-PyTorch nvfp4_group_gemm shaped like a grouped kernel, with one switchable bug of the kinds group
GEMM kernels get wrong: the tile scheduler's group index, irregular-M tails, unmasked stores, or a classic
nvfp4_gemm bug inside one group (each group runs through _kernel.run, which reads the blocked scales from
memory as a kernel does). `run(data, bug=None)` is a correct kernel."""
import torch

from _kernel import run as run_gemm

ROWS_PER_TILE = 128


def _gemm(data, i, a_from=None, scales_from=None):
    """Group i as the nvfp4_gemm 7-tuple, optionally with A (and SFA) or every scale from another group."""
    (a, b, c), (sfa, sfb), (pa, pb) = data[0][i], data[1][i], data[2][i]
    if a_from is not None:
        (a, _, _), (sfa, _), (pa, _) = data[0][a_from], data[1][a_from], data[2][a_from]
    if scales_from is not None:
        (sfa, sfb), (pa, pb) = data[1][scales_from], data[2][scales_from]
    return a, b, sfa.to(a.device), sfb.to(a.device), pa, pb, c


def _into_rows(c: torch.Tensor, product: torch.Tensor, rows: int):
    """Write `rows` rows of `product` [rows, N] through c's memory (as an epilogue does), as many as fit."""
    n = c.shape[1]
    fit = min(rows, c.untyped_storage().nbytes() // c.element_size() // n - c.storage_offset() // n)
    view = torch.empty(0, dtype=c.dtype, device=c.device).set_(c.untyped_storage(), c.storage_offset(), (fit, n), (n, 1))
    view.copy_(product[:fit])


def run(data, bug=None, group_bug=None, in_group=-1):
    abc, _, _, sizes = data
    groups = len(abc)
    out = []
    for i in range(groups):
        c = abc[i][2]
        m, n = c.shape[0], c.shape[1]
        j = (i + 1) % groups
        if bug == "exchanged":               # every CTA of group i works on group j (the write goes to c_i)
            rows, cols = min(m, sizes[j][0]), min(n, sizes[j][1])
            full = abc[j][2].clone()
            run_gemm(_gemm(data, j)[:6] + (full,))
            c[:rows, :cols] = full[:rows, :cols]
        elif bug == "wrong_a" and sizes[j][2] == sizes[i][2]:   # A, SFA pointers indexed with the next group's
            rows = min(m, sizes[j][0])
            part = _gemm(data, i, a_from=j)
            a, sfa, pa = part[0][:rows], part[2][:rows], part[4]
            window = c[:rows]
            run_gemm((a, part[1], sfa, part[3], pa, part[5], window))
        elif bug == "tail_unwritten":        # row tiles counted as M // 128: the irregular tail never runs
            full = m // ROWS_PER_TILE * ROWS_PER_TILE
            if full:
                a, b, sfa, sfb, pa, pb, _ = _gemm(data, i)
                run_gemm((a[:full], b, sfa[:full], sfb, pa, pb, c[:full]))
        elif bug == "rows_beyond_m":         # the epilogue stores whole 128-row tiles (rows past M are zeros)
            run_gemm(_gemm(data, i))
            padded = -(-m // ROWS_PER_TILE) * ROWS_PER_TILE
            product = torch.zeros((padded, n), dtype=c.dtype, device=c.device)
            product[:m] = c[:, :, 0]
            _into_rows(c, product, padded)
        else:
            run_gemm(_gemm(data, i), bug=group_bug if i == (in_group % groups) else None)
        out.append(c)
    return out
