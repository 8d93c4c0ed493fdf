"""Scale-factor layouts: plain [MN, K/16], cuBLAS "blocked" 128x4, and the competition's permuted 6-D view.

Blocked layout (cuBLAS / CUTLASS block-scale layout, what `to_blocked` produces): the scale matrix is cut
into 128-row x 4-column tiles; tiles are stored row-tile-major (`rb` outer, `cb` inner), 512 bytes each.
Inside a tile, scale (r, c) with r = 32*r4 + r32 sits at byte r32*16 + r4*4 + c.
The competition's permuted tensor has logical shape (32, 4, ceil(MN/128), 4, ceil(K/64), L) and is a
permutation of a contiguous (L, rb, cb, 32, 4, 4) buffer: per batch its memory IS the blocked layout.
"""
from __future__ import annotations

import torch

ROWS_PER_TILE = 128   # scale rows per blocked tile (32 x 4)
COLS_PER_TILE = 4     # scale columns per blocked tile (4 x 16 = 64 K-elements)
TILE_BYTES = ROWS_PER_TILE * COLS_PER_TILE
NEUTRAL_SCALE = 1.0   # pads with 1.0 so a padded row or column multiplies by a harmless value


def ceil_div(a: int, b: int) -> int:
    return (a + b - 1) // b


def blocked_offset(row: int, col: int, scale_cols: int) -> int:
    """Byte offset of scale (row, col) in the blocked layout of a matrix with `scale_cols` = K/16 columns."""
    rb, r = divmod(row, ROWS_PER_TILE)
    r4, r32 = divmod(r, 32)
    cb, c4 = divmod(col, COLS_PER_TILE)
    return (rb * ceil_div(scale_cols, COLS_PER_TILE) + cb) * TILE_BYTES + r32 * 16 + r4 * 4 + c4


def pad_scales(sf: torch.Tensor, fill: float = NEUTRAL_SCALE) -> torch.Tensor:
    """Pad a plain [rows, cols] scale matrix to multiples of 128 rows and 4 columns."""
    rows, cols = sf.shape
    pr, pc = ceil_div(rows, ROWS_PER_TILE) * ROWS_PER_TILE, ceil_div(cols, COLS_PER_TILE) * COLS_PER_TILE
    if (pr, pc) == (rows, cols):
        return sf
    out = torch.full((pr, pc), fill, dtype=torch.float32, device=sf.device).to(sf.dtype)
    out[:rows, :cols] = sf
    return out


def to_blocked(sf: torch.Tensor, pad: bool = True, fill: float = NEUTRAL_SCALE) -> torch.Tensor:
    """Plain [rows, cols] scales -> flat blocked layout (1-D, ceil(rows/128)*ceil(cols/4)*512 entries).

    The competition's gemm/gemv/dual `to_blocked` cannot pad and fails on irregular shapes (its group gemm
    one pads with 0); here padding uses `fill` (default: neutral 1.0). With pad=False the shape must
    already be a multiple of 128 x 4.
    """
    if sf.dim() != 2:
        raise ValueError(f"to_blocked takes a 2-D [rows, K/16] scale matrix, got shape {tuple(sf.shape)}")
    rows, cols = sf.shape
    if pad:
        sf = pad_scales(sf, fill)
    elif rows % ROWS_PER_TILE or cols % COLS_PER_TILE:
        raise ValueError(f"scale matrix {rows}x{cols} is not a multiple of 128x4 and pad=False")
    rb, cb = sf.shape[0] // ROWS_PER_TILE, sf.shape[1] // COLS_PER_TILE
    tiles = sf.reshape(rb, 4, 32, cb, COLS_PER_TILE)              # [rb, r4, r32, cb, c4]
    return tiles.permute(0, 3, 2, 1, 4).reshape(-1)                # [rb, cb, r32, r4, c4]


def from_blocked(flat: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """Inverse of `to_blocked`: flat blocked scales -> plain [rows, cols] (padding dropped)."""
    rb, cb = ceil_div(rows, ROWS_PER_TILE), ceil_div(cols, COLS_PER_TILE)
    if flat.numel() != rb * cb * TILE_BYTES:
        raise ValueError(f"blocked scales hold {flat.numel()} entries; {rows}x{cols} needs {rb * cb * TILE_BYTES}")
    tiles = flat.reshape(rb, cb, 32, 4, COLS_PER_TILE).permute(0, 3, 2, 1, 4)  # [rb, r4, r32, cb, c4]
    return tiles.reshape(rb * ROWS_PER_TILE, cb * COLS_PER_TILE)[:rows, :cols]


def to_permuted(sf: torch.Tensor, padding: torch.Tensor | None = None) -> torch.Tensor:
    """Plain scales [MN, K/16, L] -> the competition's permuted view (32, 4, ceil(MN/128), 4, ceil(K/64), L).

    Storage is a contiguous (L, rb, cb, 32, 4, 4) buffer, so each batch's memory equals `to_blocked`.
    Entries outside [MN, K/16] come from `padding` (same buffer shape) when given, else neutral scales.
    """
    if sf.dim() != 3:
        raise ValueError(f"expected plain scales [MN, K/16, L], got shape {tuple(sf.shape)}")
    mn, cols, l = sf.shape
    rb, cb = ceil_div(mn, ROWS_PER_TILE), ceil_div(cols, COLS_PER_TILE)
    if padding is None:
        buf = torch.full((l, rb, cb, 32, 4, 4), NEUTRAL_SCALE, dtype=torch.float32, device=sf.device).to(sf.dtype)
    else:
        buf = padding
    view = buf.permute(3, 4, 1, 5, 2, 0)                           # (32, 4, rb, 4, cb, L)
    i = torch.arange(mn, device=sf.device)
    j = torch.arange(cols, device=sf.device)
    ii, jj = torch.meshgrid(i, j, indexing="ij")
    view[ii % 32, (ii % ROWS_PER_TILE) // 32, ii // ROWS_PER_TILE, jj % 4, jj // 4, :] = sf[ii, jj, :]
    return view


def from_permuted(perm: torch.Tensor, mn: int, cols: int) -> torch.Tensor:
    """Inverse of `to_permuted`: permuted (32, 4, rb, 4, cb, L) -> plain [mn, cols, L]."""
    if perm.dim() != 6 or perm.shape[0] != 32 or perm.shape[1] != 4 or perm.shape[3] != 4:
        raise ValueError(f"expected a permuted scale tensor (32, 4, rb, 4, cb, L), got shape {tuple(perm.shape)}")
    i = torch.arange(mn, device=perm.device)
    j = torch.arange(cols, device=perm.device)
    ii, jj = torch.meshgrid(i, j, indexing="ij")
    return perm[ii % 32, (ii % ROWS_PER_TILE) // 32, ii // ROWS_PER_TILE, jj % 4, jj // 4, :]


def permuted_batch_bytes(perm: torch.Tensor, batch: int) -> torch.Tensor:
    """The flat bytes of one batch of a permuted tensor in memory order (what a kernel reads)."""
    buf = perm.permute(5, 2, 4, 0, 1, 3)                           # back to (L, rb, cb, 32, 4, 4)
    return buf[batch].reshape(-1)
