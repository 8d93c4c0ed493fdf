"""A split-K kernel whose fixup sometimes reads a partial before it is written (a missing fence): on each
call one 128x128 output tile misses its last K tile, and which one changes from call to call (a different tile
on every call, as a race lands differently each time; drawn in turn, so two calls never agree by chance)."""
import torch
from _kernel import run

calls = [0]


def custom_kernel(data):
    a, b, sfa, sfb, pa, pb, c = data
    whole = run(data).clone()
    a_short, b_short = a.clone(), b.clone()
    a_short.view(torch.uint8)[:, -64:] = 0                    # the last 128 K elements (fp4 code 0 = 0.0)
    b_short.view(torch.uint8)[:, -64:] = 0
    short = run((a_short, b_short, sfa, sfb, pa, pb, c.clone()))
    m, n, l = c.shape
    tiles = [(bt, tr, tc) for bt in range(l) for tr in range((m + 127) // 128) for tc in range((n + 127) // 128)]
    bt, tr, tc = tiles[calls[0] % len(tiles)]
    calls[0] += 1
    whole[tr * 128:(tr + 1) * 128, tc * 128:(tc + 1) * 128, bt] = short[tr * 128:(tr + 1) * 128, tc * 128:(tc + 1) * 128, bt]
    c.copy_(whole)
    return c
