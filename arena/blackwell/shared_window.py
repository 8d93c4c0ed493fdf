"""Where a kernel's dynamic shared memory starts, once its module is linked with the emulation library.

A kernel's dynamic shared memory begins where its static shared memory ends: the size of its `.nv.shared.<kernel>`
section in the cubin. Assembled whole (ptxas without -c), a module that declares its dynamic window
`.extern .shared .align 1024` (CUDA's `extern __shared__ __align__(1024)`, which 128-byte-swizzled TMA boxes need)
gets every kernel's static section rounded up to that alignment. Assembled with -c and linked by nvlink, the
alignment is lost (sections end on 16 bytes) and a TMA into the window faults with a misaligned address. This module
rounds the linked cubin's sections up to that alignment, as ptxas does, and makes the module's code take the
window's address rounded up the same way (nvlink resolves the window's symbol to the unrounded end of the static
section: the code's address and the driver's window must agree).
"""
from __future__ import annotations

import re
import struct

from arena.blackwell.ptx_text import strip_comments

_EXTERN_SHARED = re.compile(r"\.extern\s+\.shared\s+\.align\s+(\d+)\b")
_WINDOW = re.compile(r"\.extern\s+\.shared\s+\.align\s+(\d+)\s+\.\w+\s+([\w$]+)\s*\[\s*\]\s*;")
_NOBITS = 8
_DEFAULT_ALIGNMENT = 16      # what the window gets without a declared alignment


def dynamic_shared_alignment(ptx: str) -> int:
    """The largest alignment the module's `.extern .shared` declarations ask for (16 if none asks for more)."""
    return max([_DEFAULT_ALIGNMENT] + [int(a) for a in _EXTERN_SHARED.findall(strip_comments(ptx))])


def _round_up(temp: str, symbol: str, alignment: int, bits: int, guard: str = "") -> str:
    """`temp` = the address of `symbol` rounded up to `alignment` (three statements, each under `guard`)."""
    return (f"{guard}mov.u{bits} {temp}, {symbol}; {guard}add.u{bits} {temp}, {temp}, {alignment - 1}; "
            f"{guard}and.b{bits} {temp}, {temp}, {(1 << bits) - alignment:#x}; ")


def align_window_references(ptx: str) -> str | None:
    """The module with each read of an over-aligned window's address (`mov.u32/u64 %r, window;`,
    `cvta.shared.u64 %rd, window;`, the address `[window+16]` of a shared load or store on a line of its own)
    rounded up to the window's alignment; None where the window is used in another form, which the caller then
    assembles whole instead of linking."""
    for m in _WINDOW.finditer(strip_comments(ptx)):
        alignment, symbol = int(m.group(1)), m.group(2)
        if alignment <= _DEFAULT_ALIGNMENT:
            continue

        def rounded(found: re.Match, alignment=alignment, symbol=symbol) -> str:
            guard, bits, dst = found.group("guard") or "", found.group("bits"), found.group("dst")
            last = "cvta.shared.u" if found.group("op").startswith("cvta") else "mov.b"
            return (f"{{ .reg .b{bits} %emu_window; {_round_up('%emu_window', symbol, alignment, int(bits), guard)}"
                    f"{guard}{last}{bits} {dst}, %emu_window; }}")

        name = re.escape(symbol)
        at = re.compile(rf"\[\s*{name}\s*(?P<offset>[+-]\s*\d+)?\s*\]")

        def statement(found: re.Match, alignment=alignment, symbol=symbol, at=at) -> str:
            # a plain shared load or store at `[window+16]` (CuTe DSL writes them; the emulation rewrites none of
            # these): the statement takes a rounded register instead
            temp = "%emu_window_at"
            body = at.sub(lambda o: f"[{temp}{(o.group('offset') or '').replace(' ', '')}]", found.group("body"))
            return f"{found.group('indent')}{{ .reg .b32 {temp}; {_round_up(temp, symbol, alignment, 32)}{body} }}"

        ptx = re.sub(rf"(?P<guard>@!?%[\w$]+\s+)?(?P<op>mov|cvta\.shared)\.[ub](?P<bits>32|64)\s+(?P<dst>%[\w$]+)\s*,"
                     rf"\s*{name}\s*;", rounded, ptx)
        ptx = re.sub(rf"^(?P<indent>[ \t]*)(?P<body>(?:@!?%[\w$]+\s+)?(?:ld|st|atom|red)\.shared\b[^\n;]*"
                     rf"\[\s*{name}\s*(?:[+-]\s*\d+)?\s*\][^\n;]*;)",
                     statement, ptx, flags=re.M)
        uses = re.sub(rf"mov\.u(?:32|64) %emu_window(?:_at)?, {name};", "", strip_comments(ptx))
        if len(re.findall(rf"(?<![\w$]){name}(?![\w$])", uses)) > 1:     # more than its declaration
            return None
    return ptx


def align_static_shared(cubin_path: str, alignment: int) -> list[tuple[str, int, int]]:
    """Round every kernel's static shared section in the cubin (ELF64, little-endian) up to `alignment`, in place.
    Returns (section, old size, new size) for each section changed."""
    if alignment <= _DEFAULT_ALIGNMENT:
        return []
    with open(cubin_path, "rb") as f:
        elf = bytearray(f.read())
    if elf[:4] != b"\x7fELF" or elf[4] != 2 or elf[5] != 1:
        raise ValueError(f"{cubin_path}: not a little-endian ELF64 cubin")
    section_offset, = struct.unpack_from("<Q", elf, 0x28)
    entry_size, count, names_index = struct.unpack_from("<HHH", elf, 0x3A)
    names_at = struct.unpack_from("<Q", elf, section_offset + names_index * entry_size + 24)[0]
    changed = []
    for i in range(count):
        header = section_offset + i * entry_size
        name_at, kind = struct.unpack_from("<II", elf, header)
        end = elf.index(0, names_at + name_at)
        name = elf[names_at + name_at:end].decode("ascii", "replace")
        if kind != _NOBITS or not name.startswith(".nv.shared.") or name.startswith(".nv.shared.reserved"):
            continue
        size, = struct.unpack_from("<Q", elf, header + 32)
        align, = struct.unpack_from("<Q", elf, header + 48)
        rounded = -(-size // alignment) * alignment
        if rounded != size or align < alignment:
            struct.pack_into("<Q", elf, header + 32, rounded)
            struct.pack_into("<Q", elf, header + 48, max(align, alignment))
            changed.append((name, size, rounded))
    with open(cubin_path, "wb") as f:
        f.write(elf)
    return changed
