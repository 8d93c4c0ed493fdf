"""The emulation library's instruction-descriptor rules, run on the CPU: tests/blackwell/idesc_rules.cu includes
arena/blackwell/tcgen05_library.cu whole and calls its __host__ __device__ decoder `emu_idesc` (the same code the
emulated MMA runs). Rules from the PTX ISA: "Instruction descriptor" (reserved bits per .kind) and "Matrix
Shape" (N of cta_group::1 dense MMAs: steps of 8, but .kind::i8 takes 8, 16, 24, 32, then steps of 16).
The error lines the worker prints are checked through arena/blackwell/runtime.py's `describe`."""
import os
import subprocess

import pytest

from arena.blackwell import runtime, toolchain

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE = os.path.join(ROOT, "tests", "blackwell", "idesc_rules.cu")

F16, TF32, F8F6F4, I8, MXF8F6F4, MXF4, MXF4NVF4 = range(7)
OK, RESERVED, SHAPE, K96, N_RULE, M64 = 0, 20, 23, 25, 30, 31
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


@pytest.fixture(scope="module")
def decode(tmp_path_factory):
    try:
        nvcc = toolchain.real_tool("nvcc")
    except toolchain.ToolchainError:
        pytest.skip("nvcc not found")
    exe = str(tmp_path_factory.mktemp("idesc") / "rules")
    subprocess.run([nvcc, "-arch=sm_90a", "-rdc=true", "-o", exe, SOURCE], check=True, capture_output=True,
                   text=True, timeout=300)

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
