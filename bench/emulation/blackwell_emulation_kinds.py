"""tcgen05.mma kinds f16 (bf16), tf32, f8f6f4 (e4m3, and packed e2m1 x e3m2) and i8 under --emulate-blackwell's runtime, against
torch, with D read back by 32x32b and by 16x256b (which must agree cell for cell). Our own kernel:
tests/blackwell/one_mma.cu. Needs a Hopper GPU; prints one row per kind; exit 1 on any mismatch.

    python bench/emulation/blackwell_emulation_kinds.py
"""
from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)


def main() -> int:
    import torch

    from arena.blackwell import runtime
    runtime.install(torch)
    from torch.utils.cpp_extension import load_inline
    source = open(os.path.join(ROOT, "tests", "blackwell", "one_mma.cu")).read()
    declaration = "void run(torch::Tensor a, torch::Tensor b, torch::Tensor d32, torch::Tensor d256, int64_t kind, int64_t idesc);"
    module = load_inline("emulated_one_mma", cpp_sources=declaration, cuda_sources=source, functions=["run"],
                         extra_cuda_cflags=["-gencode=arch=compute_100a,code=sm_100a", "-O2"])
    torch.manual_seed(0)
    n, failures = 64, 0
    gen = {"f16 (bf16)": (0, torch.bfloat16, 16), "tf32": (1, torch.float32, 8), "f8f6f4 (e4m3)": (2, torch.float8_e4m3fn, 32),
           "i8 (s8)": (3, torch.int8, 32)}
    for name, (kind, dtype, k) in gen.items():
        if dtype == torch.int8:
            a, b = torch.randint(-128, 128, (128, k), dtype=torch.int8), torch.randint(-128, 128, (n, k), dtype=torch.int8)
            expected = (a.long() @ b.long().T).int()
            idesc = (2 << 4) | (1 << 7) | (1 << 10) | ((n >> 3) << 17) | ((128 >> 4) << 24)
        else:
            a, b = torch.randn(128, k).to(dtype), torch.randn(n, k).to(dtype)
            af, bf = a.float(), b.float()
            if dtype == torch.float32:      # tensor cores read tf32: the low 13 mantissa bits are dropped
                af = (af.view(torch.int32) & ~0x1FFF).view(torch.float32)
                bf = (bf.view(torch.int32) & ~0x1FFF).view(torch.float32)
            expected = (af.double() @ bf.double().T).float()
            fmt = {torch.bfloat16: 1, torch.float32: 2, torch.float8_e4m3fn: 0}[dtype]
            idesc = (1 << 4) | (fmt << 7) | (fmt << 10) | ((n >> 3) << 17) | ((128 >> 4) << 24)
        raw = lambda x: x.contiguous().view(torch.uint8).reshape(x.shape[0], 32).cuda()  # noqa: E731
        d32 = torch.zeros(128, n, dtype=torch.int32, device="cuda")
        d256 = torch.zeros_like(d32)
        module.run(raw(a), raw(b), d32, d256, kind, idesc)
        torch.cuda.synchronize()
        runtime.raise_on_error()
        got = d32.cpu() if dtype == torch.int8 else d32.cpu().view(torch.float32)
        same_ld = torch.equal(d32, d256)
        if dtype == torch.int8:
            ok, err = torch.equal(got, expected), 0.0
        else:
            err = ((got - expected).abs() / expected.abs().clamp_min(1.0)).max().item()
            ok = err < 1e-5
        failures += not (ok and same_ld)
        print(f"{name:14s} 128x{n}x{k}: {'match' if ok else 'MISMATCH'} (max rel err {err:.2e}); "
              f"16x256b read {'equals' if same_ld else 'DIFFERS FROM'} 32x32b read", flush=True)
    failures += packed_sub_byte(torch, runtime, module, n)
    failures += fp4_conversions(torch, runtime, load_inline)
    failures += ue8m0_conversions(torch, runtime, load_inline)
    failures += packed_fp4_tma(torch, runtime, load_inline)
    return 1 if failures else 0


def packed_sub_byte(torch, runtime, module, n) -> int:
    """kind::f8f6f4 with A e2m1 and B e3m2, packed in shared memory as the PTX ISA lays them out ("Packing format
    used for matrix A and B by .kind::mxf8f6f4 in Shared Memory"; .b4x16_p64 / .b6x16_p32): per 16 elements, a
    little-endian bit stream (8 or 12 bytes), then padding to 16 bytes (filled with junk here). Against torch."""
    import random
    rng = random.Random(0)

    def e2m1(c):
        return (-1.0 if c & 8 else 1.0) * [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0][c & 7]

    def e3m2(c):
        e, m = (c >> 2) & 7, c & 3
        return (-1.0 if c & 32 else 1.0) * (m / 4 * 2.0 ** -2 if e == 0 else (1 + m / 4) * 2.0 ** (e - 3))

    def rows(count, width):
        codes = [[rng.randrange(1 << width) for _ in range(32)] for _ in range(count)]
        raw = bytearray()
        for row in codes:
            for g in (0, 16):
                data = sum(c << (width * i) for i, c in enumerate(row[g:g + 16])).to_bytes(2 * width, "little")
                raw += data + bytes(rng.randrange(256) for _ in range(16 - 2 * width))
        return codes, torch.tensor(list(raw), dtype=torch.uint8).reshape(count, 32)

    a_codes, a = rows(128, 4)
    b_codes, b = rows(n, 6)
    av = torch.tensor([[e2m1(c) for c in r] for r in a_codes], dtype=torch.float64)
    bv = torch.tensor([[e3m2(c) for c in r] for r in b_codes], dtype=torch.float64)
    expected = (av @ bv.T).float()
    idesc = (1 << 4) | (5 << 7) | (4 << 10) | ((n >> 3) << 17) | ((128 >> 4) << 24)
    d32 = torch.zeros(128, n, dtype=torch.int32, device="cuda")
    d256 = torch.zeros_like(d32)
    module.run(a.cuda(), b.cuda(), d32, d256, 2, idesc)
    torch.cuda.synchronize()
    runtime.raise_on_error()
    got = d32.cpu().view(torch.float32)
    err = ((got - expected).abs() / expected.abs().clamp_min(1.0)).max().item()
    ok = err < 1e-6
    print(f"{'f8f6f4 packed':14s} 128x{n}x32 e2m1 x e3m2, 16 per 16 bytes: {'match' if ok else 'MISMATCH'} "
          f"(max rel err {err:.2e})", flush=True)
    return int(not ok)


def fp4_conversions(torch, runtime, load_inline) -> int:
    """cuda_fp4.h's conversions built for compute_100a (the sm_100 cvt e2m1x2 instructions, emulated) against
    the same header's host code (NVIDIA's software conversion), bit for bit: every FP4 pair to f16x2, and
    f32 pairs at every rounding boundary, their neighbours, the signed zeros, infinities, NaN and random values."""
    source = open(os.path.join(ROOT, "tests", "blackwell", "fp4_convert.cu")).read()
    module = load_inline("emulated_fp4_convert", cpp_sources="void convert(torch::Tensor x, torch::Tensor to_fp4, "
                         "torch::Tensor from_fp4);", cuda_sources=source, functions=["convert"],
                         extra_cuda_cflags=["-gencode=arch=compute_100a,code=sm_100a", "-O2"])
    edges = torch.tensor([0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0, 7.0, 1e30])
    near = torch.cat([edges, edges.nextafter(torch.tensor(float("inf"))), edges.nextafter(torch.tensor(0.0))])
    special = torch.tensor([float("inf"), float("nan"), 1e-40])
    values = torch.cat([near, -near, special, -special, torch.randn(4096) * 3])
    values = torch.cat([values, torch.zeros(values.numel() % 2 + 512)])       # whole pairs, at least 256
    out = {}
    for where in ("cpu", "cuda"):
        to_fp4 = torch.zeros(values.numel() // 2, dtype=torch.int16, device=where)
        from_fp4 = torch.zeros(256, dtype=torch.int32, device=where)
        module.convert(values.to(where), to_fp4, from_fp4)
        torch.cuda.synchronize()
        runtime.raise_on_error()
        out[where] = (to_fp4.cpu(), from_fp4.cpu())
    same_to = torch.equal(out["cpu"][0], out["cuda"][0])
    same_from = torch.equal(out["cpu"][1], out["cuda"][1])
    print(f"fp4 cvt       {values.numel()} f32 -> e2m1x2: {'match' if same_to else 'MISMATCH'}; "
          f"256 e2m1x2 -> f16x2: {'match' if same_from else 'MISMATCH'} (device emulated vs cuda_fp4.h host code)",
          flush=True)
    return int(not (same_to and same_from))



# f32 bits, then the ue8m0 code for .rz, .rp, .rz.satfinite, .rp.satfinite, computed by hand from the PTX ISA
# ("cvt": .satfinite gives NaN for NaN and positive MAX_NORM 0xfe past 2^127; "Alternate Floating Point Data
# Formats": ue8m0 is 2^(code - 127), 0xff its NaN, no infinity, no sign): as tests/test_tcgen05_isa_rules.py.
UE8M0_BY_HAND = [
    (0x3F800000, 0x7F, 0x7F, 0x7F, 0x7F), (0x3FC00000, 0x7F, 0x80, 0x7F, 0x80), (0x3F400000, 0x7E, 0x7F, 0x7E, 0x7F),
    (0xC0400000, 0x80, 0x81, 0x80, 0x81), (0x00000000, 0x00, 0x00, 0x00, 0x00), (0x80000000, 0x00, 0x00, 0x00, 0x00),
    (0x00400000, 0x00, 0x00, 0x00, 0x00), (0x00400001, 0x00, 0x01, 0x00, 0x01), (0x00000001, 0x00, 0x00, 0x00, 0x00),
    (0x00800000, 0x01, 0x01, 0x01, 0x01), (0x7F000000, 0xFE, 0xFE, 0xFE, 0xFE), (0x7F000001, 0xFE, 0xFF, 0xFE, 0xFE),
    (0x7F7FFFFF, 0xFE, 0xFF, 0xFE, 0xFE), (0x7F800000, 0xFF, 0xFF, 0xFE, 0xFE), (0xFF800000, 0xFF, 0xFF, 0xFE, 0xFE),
    (0x7FC00000, 0xFF, 0xFF, 0xFF, 0xFF), (0xFFC00001, 0xFF, 0xFF, 0xFF, 0xFF), (0x3F800000, 0x7F, 0x7F, 0x7F, 0x7F),
]


def ue8m0_conversions(torch, runtime, load_inline) -> int:
    """cuda_fp8.h's UE8M0 conversions built for compute_100a (cvt.{rz,rp}{.satfinite}.ue8m0x2.f32 and .bf16x2,
    cvt.rn.bf16x2.ue8m0x2: emulated) against the values computed by hand, and against the same header's host code
    bit for bit: f32 pairs (the hand values, random bit patterns), every bf16 in both halves of a bf16x2, all four
    modes; every ue8m0x2 pair to bf16x2 (tests/blackwell/ue8m0_convert.cu)."""
    source = open(os.path.join(ROOT, "tests", "blackwell", "ue8m0_convert.cu")).read()
    module = load_inline("emulated_ue8m0_convert", cpp_sources="void convert(torch::Tensor x, torch::Tensor words, "
                         "torch::Tensor from_f32, torch::Tensor from_bf16, torch::Tensor to_bf16);",
                         cuda_sources=source, functions=["convert"],
                         extra_cuda_cflags=["-gencode=arch=compute_100a,code=sm_100a", "-O2"])
    n = 65536
    i = torch.arange(n, dtype=torch.int64)
    words = (i | ((i * 40503) & 0xFFFF) << 16).to(torch.int64)
    words = torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)   # every bf16 in each half
    gen = torch.Generator().manual_seed(0)
    bits = torch.randint(-2**31, 2**31, (2 * n,), dtype=torch.int64, generator=gen)
    hand = torch.tensor([b for b, *_ in UE8M0_BY_HAND], dtype=torch.int64)
    bits[:hand.numel()] = hand
    x = torch.where(bits >= 2**31, bits - 2**32, bits).to(torch.int32).view(torch.float32)
    out = {}
    for where in ("cpu", "cuda"):
        tensors = [torch.zeros(4 * n, dtype=torch.int16, device=where), torch.zeros(4 * n, dtype=torch.int16, device=where),
                   torch.zeros(n, dtype=torch.int32, device=where)]
        module.convert(x.to(where), words.to(where), *tensors)
        torch.cuda.synchronize()
        runtime.raise_on_error()
        out[where] = [t.cpu() for t in tensors]
    same = [torch.equal(a, b) for a, b in zip(out["cpu"], out["cuda"])]
    device = out["cuda"][0].to(torch.int32) & 0xFFFF
    got = []
    for j in range(hand.numel()):       # value j is x[j]: pair j // 2, low byte for even j (the header's b operand)
        word = device[4 * (j // 2):4 * (j // 2) + 4]
        got.append(tuple(((word >> (8 * (j % 2))) & 0xFF).tolist()))
    by_hand = got == [tuple(codes) for _, *codes in UE8M0_BY_HAND]
    words_ok = "match" if all(same) else "MISMATCH " + str(same)
    print(f"ue8m0 cvt     {hand.numel()} f32 values by hand x 4 modes: {'match' if by_hand else 'MISMATCH'}; "
          f"{n} f32 pairs + {n} bf16x2 x 4 modes -> ue8m0x2, {n} ue8m0x2 -> bf16x2: {words_ok} (device emulated vs "
          f"cuda_fp8.h host code)", flush=True)
    if not by_hand:
        print(f"  by hand, got {got}", flush=True)
    return int(not (by_hand and all(same)))


def packed_fp4_tma(torch, runtime, load_inline) -> int:
    """A 16U4_ALIGN8B tensor map loaded at innermost coordinates counted in 4-bit elements
    (tests/blackwell/u4_tma.cu): the box must hold the source's bytes at half that coordinate."""
    source = open(os.path.join(ROOT, "tests", "blackwell", "u4_tma.cu")).read()
    module = load_inline("emulated_u4_tma", cpp_sources="void load(torch::Tensor src, int64_t c0, int64_t c1, "
                         "torch::Tensor out);", cuda_sources=source, functions=["load"], extra_ldflags=["-lcuda"],
                         extra_cuda_cflags=["-gencode=arch=compute_100a,code=sm_100a", "-O2"])
    src = torch.randint(0, 256, (64, 512), dtype=torch.uint8, device="cuda")
    failures = []
    for c0, c1 in ((0, 0), (128, 16), (384, 3), (896, 48)):
        out = torch.zeros(64 * 16, dtype=torch.uint8, device="cuda")
        module.load(src, c0, c1, out)
        torch.cuda.synchronize()
        runtime.raise_on_error()
        if not torch.equal(out.view(16, 64), src[c1:c1 + 16, c0 // 2:c0 // 2 + 64]):
            failures.append((c0, c1))
    print(f"16U4 TMA      boxes at 4-bit coordinates 0/128/384/896: "
          f"{'match' if not failures else f'MISMATCH at {failures}'}", flush=True)
    return int(bool(failures))


if __name__ == "__main__":
    sys.exit(main())
