"""Scale-factor layouts: round trips, byte identity with to_blocked, and the byte-offset formula."""
import pytest
import torch
from hypothesis import given, settings, strategies as st

from arena.nvfp4.layouts import (blocked_offset, ceil_div, from_blocked, from_permuted, permuted_batch_bytes,
                           to_blocked, to_permuted)

shapes = st.tuples(st.integers(1, 300), st.integers(1, 20), st.integers(1, 3))   # rows, K/16, L


def random_scales(rows, cols, l, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (rows, cols, l), dtype=torch.uint8, generator=g)


def test_blocked_offset_matches_the_cublas_formula_exhaustively():
    rows, cols = 256, 12
    sf = random_scales(rows, cols, 1)[:, :, 0]
    flat = to_blocked(sf)
    for r in range(rows):
        for c in range(cols):
            # cuBLAS block-scaling layout: 512-byte tiles, row-tile major; inside, (r % 32)*16 + (r // 32 % 4)*4 + c % 4.
            want = ((r // 128) * (cols // 4) + c // 4) * 512 + (r % 32) * 16 + (r % 128) // 32 * 4 + c % 4
            assert blocked_offset(r, c, cols) == want
            assert flat[want] == sf[r, c]


@settings(max_examples=60, deadline=None)
@given(shapes)
def test_blocked_round_trip_is_the_identity(shape):
    rows, cols, _ = shape
    sf = random_scales(rows, cols, 1)[:, :, 0]
    flat = to_blocked(sf)
    assert flat.numel() == ceil_div(rows, 128) * 128 * ceil_div(cols, 4) * 4
    assert torch.equal(from_blocked(flat, rows, cols), sf)


@settings(max_examples=60, deadline=None)
@given(shapes)
def test_permuted_round_trip_and_bytes_equal_to_blocked(shape):
    rows, cols, l = shape
    sf = random_scales(rows, cols, l, seed=rows * 31 + cols)
    perm = to_permuted(sf)
    assert perm.shape == (32, 4, ceil_div(rows, 128), 4, ceil_div(cols, 4), l)
    assert torch.equal(from_permuted(perm, rows, cols), sf)
    for b in range(l):
        assert torch.equal(permuted_batch_bytes(perm, b), to_blocked(sf[:, :, b]))


def test_permuted_strides_match_the_competition():
    perm = to_permuted(random_scales(256, 8, 2))     # rb=2, cb=2
    assert perm.stride() == (16, 4, 1024, 1, 512, 2048)


def test_padding_uses_neutral_scales_and_custom_padding_is_kept():
    sf = torch.full((100, 3), 2.0).to(torch.float8_e4m3fn)
    flat = to_blocked(sf).float()
    assert flat.numel() == 512 and (flat == 2.0).sum() == 300 and (flat == 1.0).sum() == 212
    pad = torch.full((1, 1, 1, 32, 4, 4), 3.0).to(torch.float8_e4m3fn)
    perm = to_permuted(sf.unsqueeze(-1), pad)
    assert (permuted_batch_bytes(perm, 0).float() == 3.0).sum() == 212


def test_unpadded_blocked_refuses_irregular_shapes():
    with pytest.raises(ValueError, match="not a multiple of 128x4"):
        to_blocked(torch.zeros(100, 4), pad=False)


def test_the_official_unpadded_formula_agrees_on_regular_shapes():
    """Cross-check with the view/permute recipe the competition's to_blocked is built on."""
    sf = random_scales(256, 8, 1)[:, :, 0]
    recipe = sf.view(2, 128, 2, 4).permute(0, 2, 1, 3).reshape(-1, 4, 32, 4).transpose(1, 2).reshape(-1)
    assert torch.equal(to_blocked(sf, pad=False), recipe)
