"""The tcgen05.ld / tcgen05.st fragment tables (32x32b, 16x64b, 16x128b, 16x256b; .x1 to .x8, both 16-lane
halves of a warp's quarter) and the tcgen05.cp 4x256b lane mapping, run under --emulate-blackwell's runtime on a
Hopper GPU, against expectations computed here by hand. Our own kernel: tests/blackwell/ld_st_tables.cu.
Prints one row per shape: shape | PASS/FAIL | first mismatch; exit 1 on any FAIL.

    python3 bench/emulation/ld_st_tables_check.py          (or: bash bench/run_gpu.sh emulation/ld_st_tables)

Where the expectations come from. The PTX ISA's "Matrix fragments for tcgen05.ld and tcgen05.st" (section
"Data Movement Shape" / "Memory Layout": "Matrix fragments for shape .32x32b", ".16x64b", ".16x128b",
".16x256b") gives the thread/register -> (lane, column) maps only as figures; its text says only that a warp
"will access 16 lanes of the Tensor Memory" and "(64 * .num)-bits" per lane for 16x64b (128 * .num, 256 * .num
for the others; 32 lanes and 32 * .num bits for 32x32b). The figures' content is written out here from NVIDIA's
own encoding of them in CUTLASS (include/cute/atom/copy_traits_sm100.hpp, Copy_Traits<SM100_TMEM_LOAD_16dp64b1x>
and its 2x/4x/8x siblings, likewise 16dp128b, 16dp256b, 32dp32b): a layout from (thread, value bit) to the bit
index b = row * W + column bit of a 16- (or 32-) row block W = (atom bits) * .num wide. Only the shapes and
strides below are taken from there (facts, no code); the evaluation is ours, and it shares nothing with
ptx_rewrite.ld_st_offsets or the library's per-thread formula (tests/test_blackwell_emulation.py compares the
three on the CPU for .x1 to .x128).

tcgen05.cp 4x256b: the ISA's "Data Movement Shape" says only "lane indicates the number of rows in the Tensor
Memory; size indicates the amount of data ... across the columns": 4 lanes x 256 bits (8 columns). The source
rows follow the ISA's canonical K-major no-swizzle layout ("Shared Memory Matrix Layout": 8-row core matrices
of 16-byte rows; the next 16 bytes of a row at LBO). Which 4 lanes is not written in the text; the emulation
puts row r in lane (address lane) + r, and that is what this row checks. CUTLASS models the same instruction
differently (Copy_Traits<SM100_UTCCP_4dp256bit_1cta>: SrcLayout (4, 256):(32, 128), row r to lane 32 r, "one
lane per 32-lane subpartition"); the row says which of the two the run matches.
"""
from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

ATOM_BITS = {"32x32b": 32, "16x64b": 64, "16x128b": 128, "16x256b": 256}
REGS_PER_REPEAT = {"32x32b": 1, "16x64b": 1, "16x128b": 2, "16x256b": 4}
# The cases of tests/blackwell/ld_st_tables.cu, in its order: (shape, .num, upper 16-lane half).
LD_CASES = [(s, n, h) for s in ATOM_BITS for n in (1, 2, 4, 8) for h in ((0,) if s == "32x32b" else (0, 1))]
ST_CASES = [(s, n, h) for s in ATOM_BITS for n in (1, 2) for h in ((0,) if s == "32x32b" else (0, 1))]
LD_COL, ST_COL, ST_READ, CP_COL = 8, 136, 128, 192


def _layout(shape: tuple, stride: tuple, index: int) -> int:
    """A CuTe layout (flat shape and stride tuples) at a colexicographic index: sum of coordinate * stride."""
    out = 0
    for extent, step in zip(shape, stride):
        out += (index % extent) * step
        index //= extent
    return out


def _copy_layouts(shape: str, num: int):
    """(thread shape, thread stride, value shape, value stride, W) of CUTLASS's Copy_Traits DstLayout for
    tcgen05.ld.<shape>.x<num>, W = bits per row of the block. Transcribed for .x1/.x2/.x4/.x8 of each shape; the
    strides follow one rule in .num (checked against the four transcribed cases in the CPU test)."""
    w = ATOM_BITS[shape] * num
    if shape == "32x32b":        # 32dp32b: (T32):(W), (V 32*num):(1)
        return (32,), (w,), (32 * num,), (1,), w
    if shape == "16x64b":        # 16dp64b: ((2,2,8)):((8W,32,W)), ((32,num)):((1,64))
        return (2, 2, 8), (8 * w, 32, w), (32, num), (1, 64), w
    if shape == "16x128b":       # 16dp128b: ((4,8)):((32,W)), ((32,2,num)):((1,8W,128))
        return (4, 8), (32, w), (32, 2, num), (1, 8 * w, 128), w
    return (4, 8), (64, w), (64, 2, num), (1, 8 * w, 256), w    # 16dp256b: ((4,8)):((64,W)), ((64,2,num)):((1,8W,256))


def expected_cell(shape: str, num: int, lane: int, reg: int) -> tuple[int, int]:
    """(row inside the 16- or 32-lane block, column) that register `reg` of thread `lane` holds in
    tcgen05.ld/st.<shape>.x<num>: the bit of value index 32 * reg (each register is 32 consecutive value bits)."""
    tshape, tstride, vshape, vstride, w = _copy_layouts(shape, num)
    bit = _layout(tshape, tstride, lane) + _layout(vshape, vstride, 32 * reg)
    return bit // w, (bit % w) // 32


def _fill(lane: int, col: int, base: int = 0) -> int:
    return base + lane * 1000 + col


def expected_ld(shape: str, num: int, half: int) -> list[list[int]]:
    regs = REGS_PER_REPEAT[shape] * num
    out = []
    for t in range(128):
        w, l = divmod(t, 32)
        row = []
        for r in range(regs):
            dl, dc = expected_cell(shape, num, l, r)
            row.append(_fill(32 * w + 16 * half + dl, LD_COL + dc))
        out.append(row)
    return out


def expected_st(index: int, shape: str, num: int, half: int) -> list[list[int]]:
    cells = {}
    for t in range(128):
        w, l = divmod(t, 32)
        for r in range(REGS_PER_REPEAT[shape] * num):
            dl, dc = expected_cell(shape, num, l, r)
            cells[(32 * w + 16 * half + dl, ST_COL + dc)] = 0x80000000 | index << 20 | t << 8 | r
    return [[cells.get((t, ST_READ + j), _fill(t, ST_READ + j, 0x40000000)) for j in range(32)] for t in range(128)]


def expected_cp(lanes_of_rows: list[int]) -> list[list[int]]:
    """Lane lanes_of_rows[r] gets source row r: word j of row r is 0xC0000000 | r << 8 | j."""
    rows = {lane: r for r, lane in enumerate(lanes_of_rows)}
    return [[(0xC0000000 | rows[t] << 8 | j) if t in rows else _fill(t, CP_COL + j, 0x40000000) for j in range(8)]
            for t in range(128)]


def first_mismatch(got: list[list[int]], want: list[list[int]], what: str) -> str | None:
    for t, (g, e) in enumerate(zip(got, want)):
        for r, (a, b) in enumerate(zip(g, e)):
            if a != b:
                return f"{what}: thread {t} register {r}: got {a:#010x}, expected {b:#010x}"
    return None


def output_words() -> int:
    return 128 * (sum(REGS_PER_REPEAT[s] * n for s, n, _ in LD_CASES) + 32 * len(ST_CASES) + 8)


def compare(words: list[int]) -> list[tuple[str, str | None]]:
    """(row name, first mismatch or None) per shape, from the kernel's output words (unsigned)."""
    at, mismatch = 0, {}

    def take(regs: int) -> list[list[int]]:
        nonlocal at
        block = [words[at + t * regs: at + (t + 1) * regs] for t in range(128)]
        at += 128 * regs
        return block

    for shape, num, half in LD_CASES:
        got = take(REGS_PER_REPEAT[shape] * num)
        if shape not in mismatch or mismatch[shape] is None:
            mismatch[shape] = first_mismatch(got, expected_ld(shape, num, half),
                                             f"ld .x{num}" + (f" lanes +{16 * half}" if half else ""))
    for index, (shape, num, half) in enumerate(ST_CASES):
        got = take(32)
        key = f"st {shape}"
        if key not in mismatch or mismatch[key] is None:
            mismatch[key] = first_mismatch(got, expected_st(index, shape, num, half),
                                           f"st .x{num}" + (f" lanes +{16 * half}" if half else "")
                                           + " read back by 32x32b")
    got = take(8)
    consecutive = first_mismatch(got, expected_cp([0, 1, 2, 3]), "cp 4x256b, read back by 32x32b")
    per_quarter = first_mismatch(got, expected_cp([0, 32, 64, 96]), "cp")
    note = "" if consecutive is None else (" (it matches CUTLASS's lane 32 r instead)" if per_quarter is None else "")
    rows = [(f"ld {s}" if not s.startswith("st ") else s, m) for s, m in mismatch.items()]
    rows.append(("cp 4x256b (row r -> lane r)", None if consecutive is None else consecutive + note))
    assert at == len(words), (at, len(words))
    return rows


def main() -> int:
    import torch

    from arena.blackwell import runtime
    runtime.install(torch)
    from torch.utils.cpp_extension import load_inline
    source = open(os.path.join(ROOT, "tests", "blackwell", "ld_st_tables.cu")).read()
    try:
        module = load_inline("emulated_ld_st_tables", cpp_sources="void run(torch::Tensor out);",
                             cuda_sources=source, functions=["run"],
                             extra_cuda_cflags=["-gencode=arch=compute_100a,code=sm_100a", "-O2"])
        out = torch.zeros(output_words(), dtype=torch.int32, device="cuda")
        module.run(out)
        torch.cuda.synchronize()
        runtime.raise_on_error()
    except Exception as e:      # one row, not a traceback: the build or the run itself failed
        print(f"{'all':28s} | FAIL | {str(e).strip().splitlines()[-1][:300] if str(e).strip() else type(e).__name__}")
        return 1
    words = [w & 0xFFFFFFFF for w in out.cpu().tolist()]
    failures = 0
    for name, problem in compare(words):
        failures += problem is not None
        print(f"{name:28s} | {'PASS' if problem is None else 'FAIL'} | {problem or '-'}", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
