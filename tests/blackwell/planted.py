"""The shipped submission.py with one planted tcgen05 bug, for `--emulate-blackwell` checks.

Each bug is a text change of the sm_100a kernel in submission.py (kernels/sm100/nvfp4_gemm_sm100.cuh); every
anchor must occur exactly once, so a kernel change that moves an anchor fails loudly instead of planting
nothing. On a B200 each of these passes some runs and fails others (or fails silently); the emulation names
each cause in one line (missing_wait_ld as a warning, and its runs pass: it breaks the result only when another
CTA takes the freed columns first):

  missing_wait_ld  the epilogue frees tensor memory right after its last tcgen05.ld, with no tcgen05.wait::ld and
                   before using the registers, so the columns can be reallocated while the load still reads them
  early_commit     the MMA thread commits to the stage's "empty" mbarrier before issuing that stage's copies and
                   MMAs, so the producer refills the stage while they may still read it
  missing_commit   the accumulator's mbarrier is arrived by the MMA thread itself instead of by tcgen05.commit,
                   so the epilogue reads tensor memory the last MMAs still write
  sbo16            the scale atoms' shared-memory descriptors have SBO = 16 bytes where the atom needs 128
  quarter0_scales  SFA is copied with .128x128b: lane quarter 0 gets the right atom, quarters 1-3 get the next
                   atoms, where .32x128b.warpx4 puts the same atom in all four quarters

    python3 tests/blackwell/planted.py BUG OUT.py      writes the variant
"""
from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]

CP_128x128B = '''
__device__ __forceinline__ void umma_cp_128x128b(uint32_t taddr, uint64_t sdesc) {
  if (t5_lane0()) asm volatile("tcgen05.cp.cta_group::1.128x128b [%0], %1;" ::"r"(taddr), "l"(sdesc) : "memory");
}
'''

# bug -> [(anchor, replacement)], applied in order
BUGS: dict[str, list[tuple[str, str]]] = {
    "missing_wait_ld": [
        ("\n  if (warp == 1) tmem_dealloc(tmem_base, kTmemCols);\n", "\n"),
        ("    tmem_wait_ld();\n",
         "    if (c0 + 32 >= kBlockN) {  // the last load: free tensor memory at once\n"
         "      tcgen05_fence_before_thread_sync();\n      __syncthreads();\n"
         "      if (warp == 1) tmem_dealloc(tmem_base, kTmemCols);\n    }\n"),
    ],
    "early_commit": [
        ("      umma_commit(&empty_bar[s]);  // frees the smem stage once these MMAs have read it\n", ""),
        ("      const uint32_t sa = smem_u32(smem + s * kStageBytes);\n",
         "      umma_commit(&empty_bar[s]);\n      const uint32_t sa = smem_u32(smem + s * kStageBytes);\n"),
    ],
    "missing_commit": [
        ("    umma_commit(done_bar);  // accumulator complete\n",
         '    if (lane == 0) asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(done_bar)) : "memory");\n'),
    ],
    "sbo16": [("make_smem_desc(smem_addr, 0u, 128u, kSwizzleNone)", "make_smem_desc(smem_addr, 0u, 16u, kSwizzleNone)")],
    "quarter0_scales": [
        ("__device__ __forceinline__ void umma_cp_32x128b_warpx4(", CP_128x128B.lstrip() + "\n__device__ __forceinline__ void umma_cp_32x128b_warpx4("),
        ("umma_cp_32x128b_warpx4(tmem_base + sfa_col(s, j), ", "umma_cp_128x128b(tmem_base + sfa_col(s, j), "),
    ],
}


def planted(bug: str, source: str | None = None) -> str:
    """submission.py's text with `bug` planted."""
    text = source if source is not None else (ROOT / "submission.py").read_text()
    for anchor, replacement in BUGS[bug]:
        found = text.count(anchor)
        if found != 1:
            raise ValueError(f"{bug}: the anchor {anchor.strip()[:60]!r} occurs {found} times in submission.py")
        text = text.replace(anchor, replacement)
    return text


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in BUGS:
        sys.exit(f"usage: planted.py {{{','.join(BUGS)}}} OUT.py")
    pathlib.Path(sys.argv[2]).write_text(planted(sys.argv[1]))
