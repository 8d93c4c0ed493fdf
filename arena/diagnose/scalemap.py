"""Reading a scale map: which stored scale each (row, K-block) received (arena/diagnose/probes.py measures it)
put into words, as a rule "row r received row f(r)'s scale" and its likely cause.

The blocked scale layout stores one 512-byte atom per (128-row tile, 4 K-blocks): row r of the tile at byte
(r % 32) * 16 + ((r % 128) / 32) * 4 + K-block % 4. A tcgen05 kernel copies an atom into tensor memory with
`tcgen05.cp ... 32x128b.warpx4` from a no-swizzle shared-memory descriptor; the copy reads its 32 16-byte
rows as four groups of 8 rows, the groups SBO bytes apart (PTX ISA, "Shared memory descriptor" and the
K-major no-swizzle canonical layout: 8 rows x 16 bytes per core matrix). The atom's rows are 16 bytes apart,
so SBO must be 128; any other SBO moves whole 8-row groups, and the map shows it: with SBO = 16, row 8·i+j
of every 32-row group receives row i+j's scale.

`explain_map` tries, in order: every SBO of that copy (`SBO_CANDIDATES`), a constant row shift, and
otherwise lists a few positions with what they received. Positions the probe could not decode (-1) never
contradict a rule.
"""
from __future__ import annotations

import torch

from arena.nvfp4.layouts import COLS_PER_TILE, ROWS_PER_TILE, TILE_BYTES, ceil_div

ATOM_ROWS, GROUP_ROWS, ROW_BYTES = 32, 8, 16
RIGHT_SBO = GROUP_ROWS * ROW_BYTES                 # 128 bytes from one 8-row group to the next
SBO_CANDIDATES = (0, 16, 32, 64, 256, 512)        # wrong SBOs tried, in bytes


def sbo_offsets(mn: int, sk: int, sbo: int) -> torch.Tensor:
    """Byte offsets [mn, sk] (in one batch's blocked buffer) that a copy with this SBO reads for each
    (row, K-block): the atom's 32 rows read as 4 groups of 8 rows, the groups `sbo` bytes apart."""
    r = torch.arange(mn).unsqueeze(1)
    j = torch.arange(sk).unsqueeze(0)
    atom = (r // ROWS_PER_TILE) * ceil_div(sk, COLS_PER_TILE) + j // COLS_PER_TILE
    lane = r % ATOM_ROWS
    inside = (lane // GROUP_ROWS) * sbo + (lane % GROUP_ROWS) * ROW_BYTES + ((r % ROWS_PER_TILE) // ATOM_ROWS) * 4 \
        + j % COLS_PER_TILE
    return atom * TILE_BYTES + inside


def stored_position(offsets: torch.Tensor, mn: int, sk: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(row, K-block) whose scale the blocked layout stores at each byte offset; -1 for padding and for
    bytes outside the buffer."""
    k_tiles = ceil_div(sk, COLS_PER_TILE)
    tile, inside = offsets // TILE_BYTES, offsets % TILE_BYTES
    row = (tile // k_tiles) * ROWS_PER_TILE + ((inside % ROW_BYTES) // 4) * ATOM_ROWS + inside // ROW_BYTES
    block = (tile % k_tiles) * COLS_PER_TILE + inside % 4
    inside_buffer = (offsets >= 0) & (row < mn) & (block < sk)
    none = torch.full_like(row, -1)
    return torch.where(inside_buffer, row, none), torch.where(inside_buffer, block, none)


def _as_probed(row: torch.Tensor, block: torch.Tensor, sk: int, wrap: int | None):
    """What the probe would decode for a read of (row, block): it codes (row tile, K-block) modulo `wrap`."""
    if wrap is None:
        return row, block
    code = ((row // ROWS_PER_TILE) * sk + block) % wrap
    known = row >= 0
    return (torch.where(known, (code // sk) * ROWS_PER_TILE + row % ROWS_PER_TILE, row),
            torch.where(known, code % sk, block))


def _fits(got_row, got_block, want_row, want_block) -> bool:
    """A predicted reading fits the probe where both are known; it must predict something."""
    both = (want_row >= 0) & (got_row >= 0)
    return bool(both.any()) and bool(((got_row == want_row) & (got_block == want_block))[both].all())


def _rows_text(sbo: int) -> str:
    step = sbo // ROW_BYTES
    source = "j" if step == 0 else "i+j" if step == 1 else f"{step}·i+j"
    past = "" if 3 * sbo + (GROUP_ROWS - 1) * ROW_BYTES < ATOM_ROWS * ROW_BYTES else \
        " (past row 31 it reads the next 512-byte atom: other K-blocks, or past the buffer)"
    return f"row 8·i+j of every 32-row group (i = 0..3, j = 0..7) received row {source}'s scale{past}"


def explain_map(got_row: torch.Tensor, got_block: torch.Tensor, operand: str, mn: int, sk: int,
                wrap: int | None = None) -> tuple[str, str] | None:
    """(pattern, likely cause) for a scale map [mn, blocks seen] of the (row, K-block) each position
    received (-1 where unknown), or None when every known position received its own scale."""
    seen = got_row.shape[1]
    want_row = torch.arange(mn).unsqueeze(1).expand(mn, seen)
    want_block = torch.arange(seen).unsqueeze(0).expand(mn, seen)
    known = got_row >= 0
    wrong = known & ((got_row != want_row) | (got_block != want_block))
    if not bool(wrong.any()):
        return None
    name = f"SF{operand}"
    for sbo in SBO_CANDIDATES:
        row, block = stored_position(sbo_offsets(mn, sk, sbo), mn, sk)
        row, block = _as_probed(row[:, :seen], block[:, :seen], sk, wrap)
        if _fits(got_row, got_block, row, block):
            example = int(torch.nonzero(wrong.any(1))[0])
            got = int(got_row[example][known[example]][0])
            return (f"{name} {_rows_text(sbo)} (row {example} got row {got}'s)",
                    f"a stride of {sbo} bytes between 8-row groups of the 512-byte scale atom where {RIGHT_SBO} is "
                    f"expected: the scale copy's shared-memory descriptor (tcgen05.cp 32x128b, no swizzle) has "
                    f"SBO = {sbo} where the atom needs {RIGHT_SBO} (8 rows x 16 bytes)")
    same_block = bool((got_block == want_block)[known].all())
    shift = (got_row - want_row)[known]
    if same_block and bool((shift == shift[0]).all()):
        c = int(shift[0])
        return (f"every {name} row r received row r{c:+d}'s scale",
                f"the scale rows are offset by {c} rows: a wrong start address or row-tile offset of the scale "
                "buffer (or of the scale copy's descriptor)")
    picks = torch.nonzero(wrong)[:4].tolist()
    listed = ", ".join(f"({r}, {j}) got ({int(got_row[r, j])}, {int(got_block[r, j])})" if got_row[r, j] >= 0
                       else f"({r}, {j}) got no stored scale" for r, j in picks)
    return (f"{name} positions (row, K-block) received other positions' scales: {listed}", "")
