"""Every way a kernel could misread the blocked scale layout, generated instead of listed.

The scale of (row r, K-block j) sits in one batch's blocked buffer at byte
    (rm * RK + kt) * 512 + r32 * 16 + r4 * 4 + c4,    rm = r / 128, r4 = (r % 128) / 32, r32 = r % 32,
                                                     kt = j / 4, c4 = j % 4  (RM, RK: row and K tiles)
which is also the 6-D permuted view sf_permuted[r32, r4, rm, c4, kt, l]. A reader goes wrong in one of
three ways, and each is generated exhaustively:
- view order: the row index r (or j) is split into its digits in another order, as a `permute` of the 6-D
  view with its axes in the wrong order does (rows composed as (rm, r32, r4), K as (c4, kt), ...);
- nesting: the digits are right but nested in memory in another order (strides from the true sizes);
- index swap: the digits land on the wrong axes of the true layout (strides of the true layout).
Readers that give the same byte for every sampled row are one reader (the first, simplest, is kept); the
hypothesis engine screens them all on a small sample and scores the best fully.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch

from arena.nvfp4.layouts import COLS_PER_TILE, ROWS_PER_TILE, ceil_div

SIZES = {"r32": 32, "r4": 4, "c4": 4}                 # rm and kt take the tile counts RM and RK
ROW_ORDER = ("rm", "r4", "r32")                      # r = rm * 128 + r4 * 32 + r32 (outermost first)
K_ORDER = ("kt", "c4")                               # j = kt * 4 + c4
MEMORY_ORDER = ("rm", "kt", "r32", "r4", "c4")       # the blocked layout's nesting, outermost first
KEY_PREFIXES = ("view_", "nest_", "swap_")          # the three kinds of reader, as their keys begin
NAMES = {"rm": "row tile (r/128)", "r4": "32-row group ((r%128)/32)", "r32": "row in group (r%32)",
         "kt": "K tile (k/4)", "c4": "position in K tile (k%4)"}


@dataclass(frozen=True)
class Reader:
    key: str
    text: str
    row_order: tuple = ROW_ORDER
    k_order: tuple = K_ORDER
    memory: tuple = MEMORY_ORDER
    assign: tuple = MEMORY_ORDER     # the digit each axis of the true layout receives

    def offsets(self, rows: torch.Tensor, sk: int, mn: int) -> torch.Tensor:
        """Byte offsets [len(rows), sk] this reader takes, inside one batch's blocked buffer."""
        sizes = dict(SIZES, rm=ceil_div(mn, ROWS_PER_TILE), kt=ceil_div(sk, COLS_PER_TILE))
        digit = {**_digits(rows.long().unsqueeze(1), self.row_order, sizes),
                 **_digits(torch.arange(sk, device=rows.device).unsqueeze(0), self.k_order, sizes)}
        if self.assign != MEMORY_ORDER:     # true strides, digits on the wrong axes
            strides = _strides(MEMORY_ORDER, sizes)
            return sum(digit[got] * strides[axis] for axis, got in zip(MEMORY_ORDER, self.assign))
        strides = _strides(self.memory, sizes)
        return sum(digit[axis] * strides[axis] for axis in MEMORY_ORDER)


def _digits(index: torch.Tensor, order: tuple, sizes: dict) -> dict:
    """Mixed-radix digits of index, `order` outermost first (the outermost digit is not wrapped)."""
    out = {}
    for axis in reversed(order[1:]):
        out[axis] = index % sizes[axis]
        index = index // sizes[axis]
    out[order[0]] = index
    return out


def _strides(order: tuple, sizes: dict) -> dict:
    strides, step = {}, 1
    for axis in reversed(order):
        strides[axis] = step
        step *= sizes[axis]
    return strides


def _names(order: tuple) -> str:
    return ", ".join(NAMES[a] for a in order)


def _swap_text(assign: tuple) -> str:
    moved = [f"{NAMES[got]} used as the {NAMES[axis]}" for axis, got in zip(MEMORY_ORDER, assign) if axis != got]
    return "scale indices given to the wrong axes of the blocked layout: " + "; ".join(moved)


def all_readers() -> list[Reader]:
    """Every single-kind misreading (the correct reader excluded), simplest first."""
    readers = []
    for rows, ks in itertools.product(itertools.permutations(ROW_ORDER), itertools.permutations(K_ORDER)):
        if (rows, ks) == (ROW_ORDER, K_ORDER):
            continue
        parts = [f"rows as ({_names(rows)})" if rows != ROW_ORDER else "",
                 f"K as ({_names(ks)})" if ks != K_ORDER else ""]
        readers.append(Reader(f"{KEY_PREFIXES[0]}{'_'.join(rows)}__{'_'.join(ks)}",
                              "the 6-D permuted scale view put back in the wrong axis order: "
                              f"{' and '.join(p for p in parts if p)}, outermost first", row_order=rows, k_order=ks))
    for order in itertools.permutations(MEMORY_ORDER):
        if order != MEMORY_ORDER:
            readers.append(Reader(f"{KEY_PREFIXES[1]}{'_'.join(order)}", f"the blocked scale layout nested in memory as "
                                  f"({_names(order)}) instead of ({_names(MEMORY_ORDER)})", memory=order))
    for assign in itertools.permutations(MEMORY_ORDER):
        if assign != MEMORY_ORDER:
            readers.append(Reader(f"{KEY_PREFIXES[2]}{'_'.join(assign)}", _swap_text(assign), assign=assign))
    readers.sort(key=lambda r: _mistakes(r))
    return readers


def _mistakes(reader: Reader) -> int:
    """How many axes a reader gets wrong (fewer = more plausible; ties keep generation order)."""
    wrong = sum(a != b for a, b in zip(reader.row_order, ROW_ORDER)) + sum(a != b for a, b in zip(reader.k_order, K_ORDER))
    wrong += sum(a != b for a, b in zip(reader.memory, MEMORY_ORDER)) + sum(a != b for a, b in zip(reader.assign, MEMORY_ORDER))
    return wrong


def distinct_readers(readers: list[Reader], rows_a: torch.Tensor, rows_b: torch.Tensor, shapes: tuple,
                     known: list[torch.Tensor]) -> list[tuple[Reader, torch.Tensor, torch.Tensor]]:
    """(reader, offsets for the sampled A rows, for the sampled B rows), one per distinct reading, leaving
    out those that read exactly as an offset pair in `known` (the hand-listed bugs, the correct layout)."""
    (mn_a, sk), (mn_b, _) = shapes
    seen = {_fingerprint(a, b) for a, b in known}
    out = []
    for reader in readers:
        off_a, off_b = reader.offsets(rows_a, sk, mn_a), reader.offsets(rows_b, sk, mn_b)
        print_ = _fingerprint(off_a, off_b)
        if print_ not in seen:
            seen.add(print_)
            out.append((reader, off_a, off_b))
    return out


def _fingerprint(off_a: torch.Tensor, off_b: torch.Tensor) -> tuple:
    return (off_a.shape, off_b.shape, off_a.cpu().numpy().tobytes(), off_b.cpu().numpy().tobytes())
