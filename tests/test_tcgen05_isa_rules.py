"""The emulation library's instruction-descriptor rules, run on the CPU: tests/blackwell/idesc_rules.cu includes
arena/blackwell/tcgen05_library.cu whole and calls its __host__ __device__ decoder `emu_idesc` (the same code the
emulated MMA runs). Rules from the PTX ISA: "Instruction descriptor" (reserved bits per .kind) and "Matrix
Shape" (N of cta_group::1 dense MMAs: steps of 8, but .kind::i8 takes 8, 16, 24, 32, then steps of 16).
The error lines the worker prints are checked through arena/blackwell/runtime.py's `describe`."""
import os
import random
import subprocess

import pytest

from arena.blackwell import error_words, runtime, toolchain

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE = os.path.join(ROOT, "tests", "blackwell", "idesc_rules.cu")
SUBBYTE = os.path.join(ROOT, "tests", "blackwell", "subbyte_smem.cu")
UE8M0 = os.path.join(ROOT, "tests", "blackwell", "ue8m0_rules.cu")

F16, TF32, F8F6F4, I8, MXF8F6F4, MXF4, MXF4NVF4 = range(7)
OK, RESERVED, SHAPE, K96, TRANSPOSE, N_RULE, M64, MXF4_MAJOR = 0, 20, 23, 25, 26, 30, 31, 32
N256 = 32 << 17
VALID = {   # (kind, idesc, scale vector) of a valid 128x256 MMA per kind
    F16: (0x10 | 1 << 7 | 1 << 10 | N256 | 8 << 24, 1),          # bf16 x bf16 -> f32: 0x08400490
    TF32: (0x10 | 2 << 7 | 2 << 10 | N256 | 8 << 24, 1),
    F8F6F4: (0x10 | N256 | 8 << 24, 1),                            # e4m3 x e4m3 -> f32
    I8: (0x20 | 1 << 7 | 1 << 10 | N256 | 8 << 24, 1),             # s8 x s8 -> s32
    MXF8F6F4: (1 << 23 | N256 | 1 << 27, 1),                       # e4m3, UE8M0, block32
    MXF4: (1 << 7 | 1 << 10 | 1 << 23 | N256 | 1 << 27, 2),        # e2m1, UE8M0, block32
    MXF4NVF4: (0x08400480, 4),                                     # e2m1, UE4M3, block16 (tcgen05.md)
}
RESERVED_BITS = {
    F16: (3, 6, 23, 29, 30, 31), TF32: (3, 6, 23, 29, 30, 31), F8F6F4: (3, 6, 23, 29, 30, 31),
    I8: (6, 13, 14, 23, 29, 30, 31),
    MXF8F6F4: (0, 1, 3, 6, 24, 25, 26, 31), MXF4: (0, 1, 3, 6, 12, 24, 25, 26), MXF4NVF4: (0, 1, 3, 6, 12, 24, 25, 26),
}


def _host_program(tmp_path_factory, source: str, name: str) -> str:
    """`source` built with the real nvcc into a host program (skips without nvcc); its path."""
    try:
        nvcc = toolchain.real_tool("nvcc")
    except toolchain.ToolchainError:
        pytest.skip("nvcc not found")
    exe = str(tmp_path_factory.mktemp(name) / name)
    subprocess.run([nvcc, "-arch=sm_90a", "-rdc=true", "-o", exe, source], check=True, capture_output=True,
                   text=True, timeout=300)
    return exe


@pytest.fixture(scope="module")
def decode(tmp_path_factory):
    exe = _host_program(tmp_path_factory, SOURCE, "idesc")

    def run(rows):
        text = "".join(f"{kind} {idesc:08x} {vec}\n" for kind, idesc, vec in rows)
        out = subprocess.run([exe], input=text, capture_output=True, text=True, timeout=60, check=True).stdout
        return [(int(line.split("->")[1].split()[0]), int(line.split()[-1], 16)) for line in out.splitlines()]
    return run


def test_the_documented_descriptors_of_every_kind_are_accepted(decode):
    assert decode([(kind, idesc, vec) for kind, (idesc, vec) in VALID.items()]) == [(OK, 0)] * len(VALID)


def test_each_reserved_bit_alone_is_rejected_and_named(decode):
    rows = [(kind, VALID[kind][0] | 1 << bit, VALID[kind][1]) for kind, bits in RESERVED_BITS.items() for bit in bits]
    got = decode(rows)
    expected = [(RESERVED, 1 << bit) for bits in RESERVED_BITS.values() for bit in bits]
    assert got == expected


def test_fields_that_are_not_reserved_are_not_reported_as_reserved(decode):
    rows = [(F16, VALID[F16][0] | 1 << 13, 1),                 # negate A: a real field
            (MXF4NVF4, VALID[MXF4NVF4][0] | 1 << 31, 4),        # K = 96: its own error (sm_103a only)
            (I8, VALID[I8][0] | 1 << 3, 1)]                     # saturate exists for .kind::i8
    assert [code for code, _ in decode(rows)] == [OK, K96, OK]


def test_a_transposed_operand_is_an_error_under_the_mxf4_kinds_and_not_emulated_elsewhere(decode):
    """The descriptor table of .kind::mxf4 / .kind::mxf4nvf4 allows only K-major A and B (transpose bits 15/16
    zero): a kernel that sets one is wrong on a B200 too (a public tcgen05 GEMM with 0x08110480 failed there).
    Other kinds allow MN-major operands, which the emulation does not model: not judged."""
    rows = [(MXF4NVF4, VALID[MXF4NVF4][0] | 1 << 16, 4), (MXF4, VALID[MXF4][0] | 1 << 15, 2),
            (MXF4NVF4, 0x08110480, 4), (F16, VALID[F16][0] | 1 << 15, 1), (MXF8F6F4, VALID[MXF8F6F4][0] | 1 << 16, 1)]
    assert [code for code, _ in decode(rows)] == [MXF4_MAJOR, MXF4_MAJOR, MXF4_MAJOR, TRANSPOSE, TRANSPOSE]
    line = runtime.describe([MXF4_MAJOR, 1, 0x08110480, 0, 0, 0, 0, 0], {1: "tcgen05.mma"})
    assert "K-major" in line and "not emulated" not in line, line
    assert "not emulated" in runtime.describe([TRANSPOSE, 1, VALID[F16][0] | 1 << 15, 0, 0, 0, 0, 0], {})


def test_n_follows_the_isa_shape_table_per_kind(decode):
    def with_n(kind, n):
        idesc, vec = VALID[kind]
        return kind, (idesc & ~(0x3F << 17)) | (n // 8) << 17, vec
    cases = [(I8, 8, OK), (I8, 24, OK), (I8, 32, OK), (I8, 40, N_RULE), (I8, 48, OK), (I8, 56, N_RULE),
             (I8, 256, OK), (MXF4NVF4, 40, OK), (MXF4NVF4, 8, OK), (F16, 8, OK), (F16, 264, N_RULE),
             (MXF4NVF4, 0, N_RULE), (TF32, 504, N_RULE)]
    assert [code for code, _ in decode([with_n(kind, n) for kind, n, _ in cases])] == [want for *_, want in cases]


def test_m_64_is_named_as_valid_but_not_emulated_and_m_256_is_refused(decode):
    f16_m64 = (VALID[F16][0] & ~(0x1F << 24)) | 4 << 24
    nvf4_m256 = (VALID[MXF4NVF4][0] & ~(3 << 27)) | 2 << 27
    assert [code for code, _ in decode([(F16, f16_m64, 1), (MXF4NVF4, nvf4_m256, 4)])] == [M64, SHAPE]


def test_a_public_kernels_descriptor_names_bit_12_and_the_e2m1_code(decode):
    """0x08201680 under .kind::mxf4nvf4 (a public submission): type 5 and bit 12 set."""
    assert decode([(MXF4NVF4, 0x08201680, 4)]) == [(RESERVED, 1 << 12)]
    line = runtime.describe([RESERVED, 1, 0x08201680, 1 << 12, 0, 0, 0, 0],
                            {1: "tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.block16 [%r1], %rd1, %rd2, %r2, [%r3], [%r4], %p1;"})
    assert "\n" not in line
    assert line.startswith("emulated tcgen05: instruction descriptor 0x08201680: bit 12 set")
    assert "E2M1 = 1" in line and "kind::mxf4nvf4.block_scale" in line


def test_the_error_lines_name_the_field():
    n40 = runtime.describe([N_RULE, 1, VALID[I8][0] & ~(0x3F << 17) | 5 << 17, I8, 0, 0, 0, 0], {})
    assert "N = 40 (bits 17-22, N >> 3) is not a valid N for .kind::i8" in n40 and "multiples of 16" in n40
    m = runtime.describe([SHAPE, 1, 0x10400480, MXF4NVF4, 0, 0, 0, 0], {})
    assert "gives M = 256" in m


def test_lint_findings_read_as_warnings_naming_the_fix():
    quarters = runtime.describe([60, 2, (33 << 1) | 0, 3, 5, 0, 0, 0], {2: "tcgen05.mma..."})
    assert quarters.startswith("emulated tcgen05 warning: SFA row 33 has different scale factors in lane quarters "
                               "0 and 3")
    assert ".32x128b.warpx4" in quarters and "CTA (5,0,0) thread 0" in quarters
    sbo = runtime.describe([61, 2, 0x40000001, 16, 0, 0, 0, 7], {2: "tcgen05.cp.cta_group::1.32x128b.warpx4 [%r1], %rd2;"})
    assert "SBO = 16 bytes" in sbo and "needs SBO >= 128" in sbo and "tcgen05.cp.cta_group::1.32x128b" in sbo


@pytest.fixture(scope="module")
def smem_position(tmp_path_factory):
    exe = _host_program(tmp_path_factory, SUBBYTE, "subbyte")

    def run(kind, fmt, bits, count):
        text = "".join(f"{kind} {fmt} {bits} {k}\n" for k in range(count))
        out = subprocess.run([exe], input=text, capture_output=True, text=True, timeout=60, check=True).stdout
        return [tuple(int(x) for x in line.split()) for line in out.splitlines()]
    return run


def _isa_row(codes, width, rng):
    """One K-major operand row of .kind::f8f6f4 / .kind::mxf8f6f4 in shared memory as the PTX ISA packs it
    ("Packing format used for matrix A and B by .kind::mxf8f6f4 in Shared Memory": "contiguously packed along
    with padding"; "Padding and alignment of the sub-byte types": .b4x16_p64 is sixteen 4-bit elements, then 64
    bits of padding, .b6x16_p32 sixteen 6-bit elements, then 32 bits; the padding is uninitialised, so random
    here). Each group of 16 elements is a little-endian bit stream, element 0 in the lowest bits (as TMA's
    16U4_ALIGN16B / 16U6_ALIGN16B copy packed global memory, and as cuda_fp4.h packs two e2m1 per byte)."""
    out = bytearray()
    for g in range(0, len(codes), 16):
        stream = sum(code << (width * i) for i, code in enumerate(codes[g:g + 16]))
        data = stream.to_bytes(2 * width, "little")          # 16 elements x width bits = 2 * width bytes
        out += data + bytes(rng.randrange(256) for _ in range(16 - len(data)))
    return bytes(out)


@pytest.mark.parametrize("kind", [F8F6F4, MXF8F6F4])
@pytest.mark.parametrize("fmt,width", [(5, 4), (3, 6), (4, 6), (0, 8), (1, 8)])
def test_sub_byte_operands_are_read_packed_with_padding_as_the_isa_lays_them_out(smem_position, kind, fmt, width):
    """e2m1 (5), e2m3 (3), e3m2 (4): 16 elements per 16 bytes, packed; e4m3/e5m2: one per byte. K = 32 elements
    per MMA: 32 bytes of a row either way, so the 16-byte chunks (and the descriptor's LBO/SBO/swizzle) are
    those of an 8-bit operand."""
    rng = random.Random(kind * 10 + fmt)
    for _ in range(20):
        codes = [rng.randrange(1 << width) for _ in range(32)]
        row = int.from_bytes(_isa_row(codes, width, rng), "little")
        got = []
        for w, bit in smem_position(kind, fmt, 8, 32):
            got.append((row >> bit) & ((1 << w) - 1))
        assert got == codes


def test_other_kinds_keep_their_element_width(smem_position):
    assert smem_position(F16, 1, 16, 3) == [(16, 0), (16, 16), (16, 32)]
    assert smem_position(I8, 1, 8, 3) == [(8, 0), (8, 8), (8, 16)]
    assert smem_position(MXF4, 1, 4, 3) == [(4, 0), (4, 4), (4, 8)]     # .kind::mxf4: two per byte, no padding


@pytest.fixture(scope="module")
def ue8m0(tmp_path_factory):
    exe = _host_program(tmp_path_factory, UE8M0, "ue8m0")

    def run(lines):
        out = subprocess.run([exe], input="".join(line + "\n" for line in lines), capture_output=True, text=True,
                             timeout=120, check=True).stdout
        return out.split("\n")[:len(lines)]
    return run


RZ, RP, RZ_SAT, RP_SAT = range(4)          # the library's mode word: bit 0 .rp, bit 1 .satfinite
UE8M0_BY_HAND = [   # f32 bits, then the ue8m0 code for .rz, .rp, .rz.satfinite, .rp.satfinite (PTX ISA "cvt" and
                    # "Alternate Floating Point Data Formats": 2^(code - 127), 0xff NaN, no infinity, no sign)
    (0x3F800000, 0x7F, 0x7F, 0x7F, 0x7F),   # 1.0 is exact
    (0x3FC00000, 0x7F, 0x80, 0x7F, 0x80),   # 1.5: down to 1, up to 2
    (0x3F400000, 0x7E, 0x7F, 0x7E, 0x7F),   # 0.75: 0.5 or 1
    (0xC0400000, 0x80, 0x81, 0x80, 0x81),   # -3.0: the sign is ignored (2 or 4)
    (0x00000000, 0x00, 0x00, 0x00, 0x00),   # zero: the smallest code, 2^-127 (ue8m0 has no zero)
    (0x80000000, 0x00, 0x00, 0x00, 0x00),   # -0
    (0x00400000, 0x00, 0x00, 0x00, 0x00),   # 2^-127 (an f32 subnormal) is exact
    (0x00400001, 0x00, 0x01, 0x00, 0x01),   # just above 2^-127: .rp gives 2^-126
    (0x00000001, 0x00, 0x00, 0x00, 0x00),   # 2^-149: below the smallest code either way
    (0x00800000, 0x01, 0x01, 0x01, 0x01),   # 2^-126
    (0x7F000000, 0xFE, 0xFE, 0xFE, 0xFE),   # 2^127 = MAX_NORM
    (0x7F000001, 0xFE, 0xFF, 0xFE, 0xFE),   # above 2^127: .rp overflows to NaN, .satfinite keeps MAX_NORM
    (0x7F7FFFFF, 0xFE, 0xFF, 0xFE, 0xFE),   # FLT_MAX
    (0x7F800000, 0xFF, 0xFF, 0xFE, 0xFE),   # +inf: NaN, or MAX_NORM with .satfinite
    (0xFF800000, 0xFF, 0xFF, 0xFE, 0xFE),   # -inf: positive MAX_NORM ("destination sign is not supported")
    (0x7FC00000, 0xFF, 0xFF, 0xFF, 0xFF),   # NaN stays NaN, .satfinite or not
    (0xFFC00001, 0xFF, 0xFF, 0xFF, 0xFF),
]


def test_ue8m0_from_f32_follows_the_isa_by_hand(ue8m0):
    lines = [f"f {mode} {bits:08x}" for bits, *_ in UE8M0_BY_HAND for mode in (RZ, RP, RZ_SAT, RP_SAT)]
    got = [int(x, 16) for x in ue8m0(lines)]
    want = [code for _, *codes in UE8M0_BY_HAND for code in codes]
    assert got == want


def test_ue8m0_to_bf16_by_hand(ue8m0):
    """cvt.rn.bf16x2.ue8m0x2: 2^(e - 127), exact in bf16 (0x00 is the bf16 subnormal 2^-127); 0xff is NaN."""
    assert [int(x, 16) for x in ue8m0(["b 0", "b 1", "b 7f", "b 80", "b fe", "b ff"])] == \
        [0x0040, 0x0080, 0x3F80, 0x4000, 0x7F00, 0x7FFF]


def test_ue8m0_conversions_equal_cuda_fp8_host_code_bit_for_bit(ue8m0):
    """Against cuda_fp8.h's host code (__nv_cvt_float_to_e8m0, __nv_cvt_bfloat16raw_to_e8m0,
    __nv_cvt_e8m0_to_bf16raw): every bf16, 393216 f32 per mode, all four modes, every ue8m0."""
    cases, mismatches, first = ue8m0(["sweep"])[0].split()
    assert int(cases) == 4 * 65536 * 7 + 256
    assert (int(mismatches), first) == (0, "-")


def library_error_codes() -> dict[str, int]:
    """The error enum of tcgen05_library.cu (E_*/W_* names, implicit values counted on as C++ does)."""
    import re
    text = open(os.path.join(ROOT, "arena", "blackwell", "tcgen05_library.cu")).read()
    body = re.search(r"enum : uint32_t \{\s*E_NONE = 0,(.*?)\};", text, re.S).group(1)
    codes, value = {}, 0
    for item in re.sub(r"//[^\n]*", "", body).replace("\n", " ").split(","):
        if not item.strip():
            continue
        name, _, given = item.partition("=")
        value = int(given) if given.strip() else value + 1
        codes[name.strip()] = value
    return codes


def test_every_library_error_code_has_a_message():
    codes = library_error_codes()
    assert codes["E_PAIR_CLUSTER"] == 80 and codes["E_SMEM_OVERWRITE"] == 74     # the parse counts as C++ does
    unused = {"E_NOT_CONVERGED", "E_SCALE_ALIGN", "E_CP_SWIZZLE"}   # never raised: kept so that the numbering holds
    missing = {name: code for name, code in codes.items() if name not in unused
               and code not in error_words.MESSAGES and code not in error_words.SITE_MESSAGES}
    assert missing == {}
    # an access past the CTA's own allocation, to columns nobody holds, is served by a B200: a warning
    beyond = runtime.describe([codes["W_BEYOND_ALLOC"], 3, 256, 4, 0, 0, 0, 0], {3: "tcgen05.cp..."})
    assert codes["W_BEYOND_ALLOC"] in runtime.WARNINGS and beyond.startswith("emulated tcgen05 warning: columns 256..256+4")
    line = runtime.describe([codes["E_PAIR_TMA_MULTICAST"], 3, 0x2, 0, 0, 0, 0, 0], {3: "cp.async.bulk.tensor..."})
    assert "ctaMask 0x2" in line and "must hold the issuing CTA" in line and "emulation error" not in line
    assert codes["E_TMA_BOX_BYTES"] not in runtime.WARNINGS and codes["W_PAIR_ODD_MMA"] in runtime.WARNINGS
    odd = runtime.describe([codes["W_PAIR_ODD_MMA"], 3, 1, 0, 0, 0, 0, 0], {3: "tcgen05.mma.cta_group::2..."})
    assert odd.startswith("emulated tcgen05 warning: tcgen05.mma.cta_group::2 issued by the odd CTA") and "rank 1" in odd
    lanes = runtime.describe([codes["E_PAIR_TMA"], 3, 0, 2, 0, 0, 0, 0], {3: "cp.async.bulk.tensor..."})
    assert "from 2 lanes of one warp at once" in lanes and "\n" not in lanes
    remote = runtime.describe([codes["E_PAIR_TMA"], 3, 1, 1, 0, 0, 0, 0], {3: "cp.async.bulk.tensor..."})
    assert "its destination is in CTA rank 1, not the issuing CTA" in remote


ALLOC = os.path.join(ROOT, "tests", "blackwell", "alloc_rules.cu")


def test_an_alloc_count_a_b200_takes_warns_and_one_outside_the_tensor_memory_fails(tmp_path_factory):
    """The PTX ISA asks tcgen05.alloc for a power of two from 32 to 512 columns; B200s ran public GEMMs that
    allocate 136 and 144 (five benchmarked on them), so a count within 32..512 is a warning (68) and takes the
    next power of two; a count outside is an error (2)."""
    exe = _host_program(tmp_path_factory, ALLOC, "alloc")
    counts = [32, 128, 512, 136, 144, 160, 33, 511, 16, 0, 513, 1024]
    out = subprocess.run([exe], input="".join(f"{n}\n" for n in counts), capture_output=True, text=True,
                         timeout=60, check=True).stdout
    got = {int(line.split()[0]): tuple(int(x) for x in line.split("->")[1].split()) for line in out.splitlines()}
    codes = library_error_codes()
    warn, fail = codes["W_ALLOC_NCOLS"], codes["E_ALLOC_NCOLS"]
    assert got == {32: (0, 32), 128: (0, 128), 512: (0, 512), 136: (warn, 256), 144: (warn, 256), 160: (warn, 256),
                   33: (warn, 64), 511: (warn, 512), 16: (fail, 32), 0: (fail, 32), 513: (fail, 512),
                   1024: (fail, 512)}
    assert warn in runtime.WARNINGS and fail not in runtime.WARNINGS
    line = runtime.describe([warn, 3, 136, 256, 0, 0, 0, 0], {3: "tcgen05.alloc..."})
    assert line.startswith("emulated tcgen05 warning: tcgen05.alloc of 136 columns") and "allocates 256" in line


def test_alloc_takes_the_lowest_free_columns_and_waits_out_their_grace_rather_than_take_higher_ones(
        tmp_path_factory):
    """A B200 hands out the lowest free columns: vyomakesh0728's GEMM runs one CTA per SM, allocates 256 columns,
    uses and frees column 0 without reading alloc's result, and passed on a B200. Columns another CTA freed just
    before stay in a grace period; a new CTA that took 256..511 meanwhile failed there with "dealloc of address 0x0
    ... this CTA did not allocate them". Masks: bit g = 32-column granule g."""
    exe = _host_program(tmp_path_factory, ALLOC, "alloc_pick")
    cases = [  # (free, settled, granules needed) -> first granule, or -1 = wait
        (0xFFFF, 0xFFFF, 8, 0),       # all free: column 0
        (0xFFFF, 0xFF00, 8, -1),      # 0..255 just freed by another CTA, 256..511 settled: wait for 0..255
        (0xFF00, 0xFF00, 8, 8),       # 0..255 held: 256..511
        (0xFF00, 0x0000, 8, -1),      # 256..511 free but in its grace: wait
        (0x0000, 0xFFFF, 8, -1),      # nothing free: wait
        (0xFFFE, 0xFFFF, 1, 1),       # 32 columns, granule 0 held: the next one
        (0xFFFE, 0xFFFF, 2, 2),       # runs are aligned to their size
        (0xFFFF, 0xFFFF, 16, 0),      # all 512
        (0x7FFF, 0xFFFF, 16, -1),
    ]
    out = subprocess.run([exe], input="".join(f"pick {f:x} {s:x} {n}\n" for f, s, n, _ in cases),
                         capture_output=True, text=True, timeout=60, check=True).stdout
    assert [int(line.split("->")[1]) for line in out.splitlines()] == [want for *_, want in cases]


def test_alloc_names_a_deadlock_only_when_every_holder_waits_and_no_request_fits(tmp_path_factory):
    """tcgen05.alloc blocks until its columns are free. When every CTA that holds an SM's tensor memory is itself
    waiting in alloc and no waiter's request fits, none will ever free any: jIab-b's gemv @fe09570 allocates 128,
    128, 32 and 32 columns per CTA with many CTAs per SM, and its B200 run timed out. Owners: one CTA tag per
    32-column granule; waiters: tag and granules asked for."""
    exe = _host_program(tmp_path_factory, ALLOC, "alloc_deadlock")
    two_hold_all = ",".join(["1"] * 8 + ["2"] * 8)
    cases = [  # (owners, waiters) -> deadlock
        (two_hold_all, "1:1,2:1", 1),                 # both holders wait for 32 more
        (two_hold_all, "1:1,2:1,3:8", 1),             # and a third CTA waits for its first 256
        (two_hold_all, "2:1,3:8", 0),                 # CTA 1 holds and does not wait: it will free
        (two_hold_all, "-", 0),                       # nobody waits
        (two_hold_all, "1:1,2:0", 0),                 # a waiter's request not yet known: not stuck
        (",".join(["1"] * 8 + ["0"] * 8), "1:1,3:16", 0),   # CTA 1's 32 fit in the free half
        (",".join(["1"] * 8 + ["0"] * 8), "1:16", 1),       # 512 never fit beside its own 256
        (",".join(["0"] * 16), "3:16", 0),            # all free
    ]
    out = subprocess.run([exe], input="".join(f"deadlock {o} {w}\n" for o, w, _ in cases),
                         capture_output=True, text=True, timeout=60, check=True).stdout
    assert [int(line.split("->")[1]) for line in out.splitlines()] == [want for *_, want in cases]
    line = runtime.describe([library_error_codes()["E_ALLOC_DEADLOCK"], 3, 32, 7, 0, 0, 0, 0], {3: "tcgen05.alloc..."})
    assert "tcgen05.alloc of 32 columns on SM 7 can never be served" in line and "\n" not in line


SDESC = os.path.join(ROOT, "tests", "blackwell", "sdesc_rules.cu")


def _sdesc(start: int, swizzle: int, base_offset: int) -> int:
    """A K-major descriptor (version 1 at bit 46, SBO 1024) at shared address `start`."""
    return (start >> 4) | (1 << 16) | (1024 >> 4) << 32 | 1 << 46 | base_offset << 49 | swizzle << 61


def test_a_base_offset_is_accepted_only_as_the_isa_computes_it(tmp_path_factory):
    """The PTX ISA ("Shared memory descriptor"): a swizzle pattern that does not start at its repeat boundary
    has base offset (start >> 7) & 7 (Triton's tl.dot_scaled sets it); the swizzle then acts on the absolute
    address, which is what the emulation reads. Any other non-zero base offset, or one without a swizzle, is
    refused (error 42, which the worker says it cannot judge)."""
    exe = _host_program(tmp_path_factory, SDESC, "sdesc")
    rows = [(_sdesc(0x1000, 2, 0), 0), (_sdesc(0x1180, 2, 3), 0), (_sdesc(0x1380, 4, 7), 0),
            (_sdesc(0x1180, 2, 2), 42), (_sdesc(0x1180, 0, 3), 42), (_sdesc(0x1000, 2, 1), 42)]
    text = "".join(f"{d:x}\n" for d, _ in rows)
    out = subprocess.run([exe], input=text, capture_output=True, text=True, timeout=60, check=True).stdout
    assert [int(line.split("->")[1]) for line in out.splitlines()] == [want for _, want in rows], out
    assert "is not emulated" in runtime.describe([42, 0, 0x4000_0000, 0, 0, 0, 0, 0] + [0] * 8, {})


class _Recorder:
    """raise_on_error and the synchronous switch of runtime.checked_call, replaced: `errors` is what each
    check after a call raises in turn (None: nothing recorded)."""

    def __init__(self, monkeypatch, errors):
        self.errors, self.switches, self.calls = list(errors), [], 0
        monkeypatch.setattr(runtime, "raise_on_error", self.check)
        monkeypatch.setattr(runtime, "_set_synchronous", self.switches.append)
        monkeypatch.delenv(runtime.SYNCHRONOUS_VARIABLE, raising=False)

    def check(self):
        error = self.errors.pop(0)
        if error is not None:
            raise error

    def call(self):
        self.calls += 1
        return f"result of call {self.calls}"


def _changed_operand(module="ext.so"):
    line = runtime.describe([73, 2, 2, 0x9300, 1, 0, 0, 32], {2: "tcgen05.cp.cta_group::1.32x128b.warpx4 [%r1], %rd2;"})
    return runtime.EmulationError(line, 73, module)


def test_an_operand_changed_before_completion_is_run_again_synchronously_and_passes_with_a_warning(monkeypatch,
                                                                                                      capsys):
    recorder = _Recorder(monkeypatch, [_changed_operand(), None])
    assert runtime.checked_call(recorder.call) == "result of call 2"
    assert recorder.switches == [1, 0]
    warning = capsys.readouterr().err.strip()
    assert warning.startswith("emulated tcgen05 warning: the source of this instruction in shared memory")
    assert "A race a B200 tolerates in practice" in warning and "completing at issue" in warning
    assert "\n" not in warning


@pytest.mark.parametrize("errors, reason", [
    ([_changed_operand(), _changed_operand()], "the synchronous run records an error too"),
    ([_changed_operand(module=None)], "a CuTe DSL or Triton kernel has no synchronous switch"),
    ([runtime.EmulationError("emulated tcgen05: tcgen05.alloc of 160 columns ...", 2, "ext.so")], "not a race"),
])
def test_a_race_is_forgiven_only_when_the_synchronous_run_is_clean(monkeypatch, capsys, errors, reason):
    recorder = _Recorder(monkeypatch, errors)
    with pytest.raises(runtime.EmulationError):
        runtime.checked_call(recorder.call)
    assert recorder.switches in ([], [1, 0]), reason       # never left in the synchronous mode
    assert "warning" not in capsys.readouterr().err


def test_nothing_recorded_means_one_call(monkeypatch):
    recorder = _Recorder(monkeypatch, [None])
    assert runtime.checked_call(recorder.call) == "result of call 1" and recorder.switches == []


def test_a_dealloc_behind_copies_no_commit_covers_is_run_again_synchronously(monkeypatch, capsys):
    """The same GEMM's uncommitted copies, still queued at its tcgen05.dealloc (1 case in 13 of its run)."""
    line = runtime.describe([72, 3, 2, 0, 0, 0, 0, 0], {2: "tcgen05.cp.cta_group::1.32x128b.warpx4 [%r15], %rd19;",
                                                         3: "tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r1, 256;"})
    recorder = _Recorder(monkeypatch, [runtime.EmulationError(line, 72, "ext.so"), None])
    assert runtime.checked_call(recorder.call) == "result of call 2" and recorder.switches == [1, 0]
    assert "never committed" in capsys.readouterr().err


def test_a_load_after_another_warps_dealloc_is_run_again_synchronously(monkeypatch, capsys):
    """A GEMM that passed on its author's B200 frees tensor memory from warp 0 with no barrier after the other
    warps' loads: under twelve evaluations at once, another CTA took the columns while one warp still loaded them
    (error 75, 1 shape of 13). The second run holds freed columns back longer and passes with the warning."""
    line = runtime.describe([75, 4, 104, 8, 3, 0, 0, 64], {4: "tcgen05.ld.sync.aligned.32x32b.x8.b32 {...}, [%r9];"})
    recorder = _Recorder(monkeypatch, [runtime.EmulationError(line, 75, "ext.so"), None])
    assert runtime.checked_call(recorder.call) == "result of call 2" and recorder.switches == [1, 0]
    warning = capsys.readouterr().err.strip()
    assert "another CTA has allocated since" in warning and "A race a B200 tolerates in practice" in warning


def test_a_library_loaded_for_torch_ops_is_watched_like_a_module(monkeypatch):
    """load_inline(..., is_python_module=False) returns the path of the library it loaded (kernels reached through
    torch.ops, as a public GEMM of 14 kernels does): its record must be read after each call like a module's, or
    the emulation's errors and work counts go unread (its predictions said "no tcgen05 MMA issued")."""
    monkeypatch.setitem(runtime._state, "modules", [])

    class Module:
        __file__ = "/build/ext_a.so"

    assert runtime._record("/build/ext_b.so") == "/build/ext_b.so"
    runtime._record(Module)
    runtime._record("/build/ext_b.so")
    assert runtime._state["modules"] == ["/build/ext_b.so", "/build/ext_a.so"]
