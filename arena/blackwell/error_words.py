"""The emulation library's error and warning records in words (arena/blackwell/tcgen05_library.cu writes them;
arena/blackwell/runtime.py reads them after each call): one line naming the instruction, its CTA and thread, and
what it did wrong. A record is eight words: code, call site, two values (a, b), the CTA's x, y, z and the thread.
"""
from __future__ import annotations

# Error codes of tcgen05_library.cu, in words. {a} and {b} are the two values the library recorded.
MESSAGES = {
    1: "this GPU has more SMs ({a}) than the emulation provides ({b})",
    2: "tcgen05.alloc of {a} columns: the column count must be a power of two from 32 to 512",
    68: "tcgen05.alloc of {a} columns: not a power of two, which the PTX ISA requires (32 to 512); B200s ran such "
        "counts in public kernels, and the emulation allocates {b}: what a B200 allocates instead is not documented",
    3: "tcgen05.alloc of {a} columns waited on SM {b} while its tensor memory went unused for 2 s: its columns "
       "are held by a CTA that never ran tcgen05.dealloc (the columns were taken back)",
    11: "tcgen05.alloc of {a} columns on SM {b} can never be served: every CTA holding this SM's tensor memory is "
        "itself waiting in tcgen05.alloc, so none will free any (a deadlock: a B200 waits here until the run is "
        "killed). Take all of a CTA's columns in one tcgen05.alloc, or let fewer CTAs share an SM; this CTA went "
        "on without the columns",
    4: "tcgen05.dealloc of address {a:#x}, {b} columns: this CTA did not allocate them",
    5: "tcgen05.dealloc of address {a:#x}, {b} columns: not an allocation's start and size",
    6: "columns {a}..{a}+{b} of tensor memory are not allocated to this CTA",
    7: "tensor memory address {a:#x} used by warp {b}: the access runs past the warp's 32-lane quarter "
       "(lanes 32*(warp % 4) .. +31)",
    8: "tensor memory lanes from address {a:#x} run past lane 127",
    9: "tensor memory columns {a}..{a}+{b} run past column 511",
    20: lambda a, b: f"instruction descriptor {a:#010x}: {_bits(b)} set, which the PTX ISA's descriptor table for "
                     f"this .kind marks reserved (or valid only for .kind::i8, .ws or sparse MMAs)" + _e2m1_hint(a, b),
    21: "instruction descriptor {a:#010x}: sparse MMA is not emulated",
    22: "instruction descriptor {a:#010x}: A/B data types are not valid for this .kind",
    23: lambda a, b: f"instruction descriptor {a:#010x}: the M field gives M = {_m(a, b)}; cta_group::1 takes M = 128 "
                     "(or 64 for the unscaled kinds)",
    24: "instruction descriptor {a:#010x}: scale-factor ids must be 0 with block16 (and 0 or 2 with block32)",
    25: "instruction descriptor {a:#010x}: K = 96 is sm_103a only",
    26: "instruction descriptor {a:#010x}: transposed (MN-major) operands are not emulated",
    27: "instruction descriptor {a:#010x}: the accumulator type is not emulated (F32, or S32 for .kind::i8)",
    28: "instruction descriptor {a:#010x}: the scale type does not match the block size (UE4M3 with block16, "
        "UE8M0 with block32)",
    30: lambda a, b: f"instruction descriptor {a:#010x}: N = {((a >> 17) & 0x3F) * 8} (bits 17-22, N >> 3) is not a valid N "
                     f"for .kind::{KIND_NAMES.get(b, b)} with cta_group::1: "
                     + ("8, 16, 24, 32, then multiples of 16 up to 256" if b == 3 else "a multiple of 8 from 8 to 256"),
    31: "instruction descriptor {a:#010x}: M = 64 (bits 24-28, M >> 4) is valid, but its accumulator layout is not "
        "emulated",
    32: lambda a, b: f"instruction descriptor {a:#010x}: transpose {'A' if a >> 15 & 1 else 'B'} (bit "
                     f"{15 if a >> 15 & 1 else 16}) is set, and .kind::mxf4 / .kind::mxf4nvf4 take K-major A and B "
                     "only (the PTX ISA's instruction descriptor table for these kinds): outside the ISA's contract, "
                     "its result on a B200 is not defined",
    40: "shared memory descriptor (high word {a:#010x}): bits 46-48 must be 0b001 on sm_100",
    41: "shared memory descriptor (high word {a:#010x}): invalid swizzle mode",
    42: "shared memory descriptor (high word {a:#010x}): a base offset other than 0 or the ISA's (start address >> 7) "
        "& 7 with a swizzle is not emulated",
    43: "shared memory descriptor (high word {a:#010x}): the absolute LBO mode is not emulated",
    50: "tcgen05.cp shape code {a} is not emulated",
    60: lambda a, b: f"SF{'AB'[a & 1]} {'row' if a & 1 == 0 else 'column'} {a >> 1} has different scale factors in lane "
                     f"quarters 0 and {b} of tensor memory; the PTX ISA asks for the same copy in all four 32-lane "
                     "quarters (tcgen05.cp .32x128b.warpx4 writes all four); this emulation reads the quarter of each "
                     "accumulator row",
    61: lambda a, b: f"shared memory descriptor (high word {a:#010x}) has SBO = {b} bytes with no swizzle: its 8-row "
                     "groups (8 rows x 16 bytes) overlap; a K-major source needs SBO >= 128 (128 for a 32x128b scale "
                     "atom)",
    64: lambda a, b: f"this tcgen05.ld reads tensor-memory columns {a}..{a}+{b} after this CTA freed them (a "
                     "tcgen05.dealloc before this warp's loads): they still hold the accumulator unless another CTA "
                     "allocates them first; synchronize the warps before tcgen05.dealloc",
    75: lambda a, b: f"this tcgen05.ld reads tensor-memory columns {a}..{a}+{b} that this CTA freed and another CTA "
                     "has allocated since: a warp freed them (tcgen05.dealloc) while this warp still had loads to do, "
                     "so the load may read the other CTA's data; synchronize the warps (tcgen05.wait::ld, then a "
                     "barrier) before tcgen05.dealloc",
    80: "tcgen05.alloc.cta_group::2 in a CTA of cluster rank {b} of a cluster of {a} CTAs: a CTA pair is cluster "
        "ranks 2k and 2k+1, and this CTA has no peer",
    81: lambda a, b: f"tcgen05.alloc.cta_group::2: the peer CTA (cluster rank {a}) "
                     + ("did not execute its tcgen05.alloc.cta_group::2 within 10 s (both CTAs of the pair must)"
                        if b == 0 else "could not be met: the emulation's table of CTA pairs is full"),
    82: "a .cta_group::2 instruction in a CTA (cluster rank {a} of {b}) that holds no tensor memory from "
        "tcgen05.alloc.cta_group::2: the pair's tensor memory must be allocated by both CTAs with .cta_group::2 first",
    83: lambda a, b: f"instruction descriptor {a:#010x}: M = {_m(a, b)} with cta_group::2; the emulation covers M = 256 "
                     "(128 rows per CTA of the pair); M = 128 across a pair is not emulated",
    84: lambda a, b: f"instruction descriptor {a:#010x}: N = {((a >> 17) & 0x3F) * 8} with cta_group::2: N must be a "
                     "multiple of 16 from 16 to 256 (each CTA of the pair holds N / 2 rows of B)",
    85: "tcgen05.mma.cta_group::2 with a disable-output-lane mask that disables lanes (the OR of its registers is "
        "{a:#x}): only the all-zero mask is emulated",
    86: lambda a, b: f"columns {a}..{a}+{b & 0xFFFF} of the tensor memory of the pair's "
                     f"{'even' if b >> 16 == 0 else 'odd'} CTA are not allocated to it (its tcgen05.alloc.cta_group::2 "
                     "did not take them, or it has deallocated them)",
    87: lambda a, b: ("a TMA with .cta_group::2 completes on the pair's other CTA's mbarrier "
                      + (f"from {b} lanes of one warp at once: the emulation forwards such loads one lane at a time "
                         "per warp" if b != 1 else f"while its destination is in CTA rank {a}, not the issuing CTA: "
                         "the emulation forwards only loads into the issuing CTA's own shared memory")),
    88: ("a TMA .multicast::cluster with .cta_group::2 from CTA rank {b} (ctaMask {a:#x}): the emulation loads the box "
         "into the issuing CTA and copies it to the mask's other CTAs, so the mask must hold the issuing CTA, the "
         "destination must be its own shared memory, and one lane of a warp issues it at a time"),
    89: ("a TMA's tensor map leaves the bytes of one box (word 16) at 0, as a map the kernel's host code encodes "
         "itself does, and its element type code {b} (word 2 = {a:#010x}) is not emulated: the emulation does not "
         "know its size, so it cannot count the bytes the TMA completes on its mbarrier"),
    90: ("tcgen05.mma.cta_group::2 issued by the odd CTA of its pair (cluster rank {a}): the PTX ISA has a single "
         "thread of the pair issue it, and CUTLASS and CuTe DSL issue it from the even CTA. The emulation runs the "
         "even CTA's pair MMAs only: a public kernel whose odd CTA issued them as well (never committed) passed on "
         "B200s; a kernel whose odd CTA is the pair's only issuer gets no result from it here"),
}
_OPERANDS = {0: "A operand", 1: "B operand", 2: "source"}


def _unfinished(a: int, b: int, sites: dict[int, str], lead: str, verb: str) -> str:
    """`lead` + the queued operation at site a + why it is unfinished (b: 0 never committed, else its commit's
    mbarrier + 1)."""
    operation = f"`{sites.get(a, f'call site {a}')}`"
    if b == 0:
        why = "that operation was never committed (no tcgen05.commit after it), so nothing orders it before this instruction"
    else:
        why = (f"its tcgen05.commit arrives on the mbarrier at shared address {b - 1:#x}, and no thread waited on that "
               "mbarrier's phase before this instruction")
    return f"{lead} {operation} still {verb}: {why}"


# Codes whose words need the module's call sites (a names another instruction).
SITE_MESSAGES = {
    70: lambda a, b, sites: f"this instruction writes or frees tensor-memory columns that `{sites.get(a, f'call site {a}')}` "
                            f"(warp {b}) has not finished reading: that load was neither waited for (tcgen05.wait::ld) "
                            "nor were its registers used yet, so the hardware may still be reading them",
    71: lambda a, b, sites: _unfinished(a, b, sites, "this tcgen05.ld reads tensor-memory columns that", "writes"),
    72: lambda a, b, sites: _unfinished(a, b, sites, "this tcgen05.dealloc frees tensor-memory columns that", "writes"),
    73: lambda a, b, sites: f"the {_OPERANDS.get(a, 'operand')} of this instruction in shared memory (descriptor start "
                            f"{b:#x}) changed after it was issued and before its tcgen05.commit's mbarrier completed: "
                            "the stage was refilled while the operation could still read it (wait on the mbarrier "
                            "the commit arrives on before overwriting the stage)",
    63: lambda a, b, sites: f"this tcgen05.dealloc frees tensor-memory columns that `{sites.get(a, f'call site {a}')}` "
                            f"(warp {b}) has not finished reading (no tcgen05.wait::ld, its registers not used yet): "
                            "another CTA may allocate and overwrite them while the load still reads; wait for the "
                            "load and synchronize the warps (tcgen05.wait::ld, then a barrier) before tcgen05.dealloc",
    67: lambda a, b, sites: f"this MMA reads tensor memory (scale factors, A or the accumulator) that warp {b} wrote "
                            f"with `{sites.get(a, f'call site {a}')}`, and no barrier orders that store before the "
                            "MMA (the issuing warp passed no bar.sync or mbarrier wait after it; a warp's "
                            "tcgen05.wait::st orders its own stores only): the MMA sees the store only if it was "
                            "issued first, as here; on a B200 a warp that stores later (after a slower load, say) "
                            "leaves the MMA the old values. After tcgen05.wait::st, synchronize the warps "
                            "(tcgen05.fence::before_thread_sync, a barrier, tcgen05.fence::after_thread_sync)",
    66: lambda a, b, sites: f"this tcgen05.st (warp {b}) writes tensor memory that `{sites.get(a, f'call site {a}')}` "
                            "reads, issued earlier with nothing ordering the two (no wait on its tcgen05.commit's "
                            "mbarrier before the store): the emulation runs that MMA first, on the values before the "
                            "store, as a B200 most likely does; wait on the commit's mbarrier before overwriting what "
                            "an MMA reads",
    69: lambda a, b, sites: f"this tcgen05.st (warp {b}) writes tensor memory that `{sites.get(a, f'call site {a}')}` "
                            "also writes, issued earlier with nothing completing it first (no wait on a "
                            "tcgen05.commit's mbarrier before the store): the emulation completes that operation "
                            "first and the store's values stand, as a B200, which runs an issued operation at once, "
                            "most likely does; wait on the commit's mbarrier before storing over what it writes",
    74: lambda a, b, sites: _unfinished(a, b, sites, "this copy writes shared memory that", "reads")
                            + " (a stage refilled before the commit that frees it completed)",
}
MESSAGES[62] = ("a TMA uses a tensor map of element type {b} (word 2 = {a:#010x}): a Blackwell-only type other than "
                "packed FP4 (16U4_ALIGN8B), such as 16U4_ALIGN16B or 16U6_ALIGN16B, which the emulation does not "
                "translate for Hopper's TMA")
KIND_NAMES = {0: "f16", 1: "tf32", 2: "f8f6f4", 3: "i8", 4: "mxf8f6f4", 5: "mxf4", 6: "mxf4nvf4"}
MESSAGES[65] = ("columns {a}..{a}+{b} of tensor memory lie past this CTA's tcgen05.alloc, and no other CTA holds them: "
                "a B200 reads and writes them all the same, until another CTA on the SM allocates them (allocate "
                "every column the kernel uses)")
WARNINGS = (60, 61, 63, 64, 65, 66, 67, 68, 69, 90)


def _bits(mask: int) -> str:
    bits = [str(i) for i in range(32) if mask >> i & 1]
    return ("bit " if len(bits) == 1 else "bits ") + ", ".join(bits)


def _m(a: int, kind: int) -> int:
    return ((a >> 27) & 3) * 128 if kind >= 4 else ((a >> 24) & 0x1F) * 16


def _e2m1_hint(a: int, mask: int) -> str:
    if mask >> 12 & 1 and (a >> 7) & 7 == 5:
        return ("; A/B type 5 is E2M1 under .kind::mxf8f6f4 (3-bit fields), while under .kind::mxf4/mxf4nvf4 "
                "the type fields are bits 7-9 and 10-11 and E2M1 = 1")
    return ""


def describe(record: list[int], sites: dict[int, str]) -> str:
    code, site, a, b = record[:4]
    message = MESSAGES.get(code, "emulation error {code}")
    if code in SITE_MESSAGES:
        what = SITE_MESSAGES[code](a, b, sites)
    else:
        what = message(a, b) if callable(message) else message.format(a=a, b=b, code=code)
    where = f"CTA ({record[4]},{record[5]},{record[6]}) thread {record[7]}"
    instruction = sites.get(site, f"call site {site}")
    label = "emulated tcgen05 warning" if code in WARNINGS else "emulated tcgen05"
    return f"{label}: {what}; at `{instruction}` ({where})"
