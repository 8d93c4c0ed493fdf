"""CTA pairs (.cta_group::2) under --emulate-blackwell's runtime, against torch: our own look-alike 2-SM kernel
(tests/blackwell/cta_pair_gemm.cu; clusters of 2 CTAs, M = 256 per pair, N = 128, plain loads; alloc, mma, cp, commit
and ld with .cta_group::2; and the same tiles with one-CTA instructions in clusters of 2) built for sm_100a through
the emulation toolchain, plus a TMA .cta_group::2 probe (both CTAs
complete their bytes on the even CTA's mbarrier, as CUTLASS's SM100_TMA_2SM_LOAD does; once unicast, once with
.multicast::cluster to both CTAs; each again with the map's word 16 at 0, as a map CuTe DSL encodes itself), and
a pair GEMM whose odd CTA issues the MMAs too (uncommitted; passes with a warning). Needs a Hopper GPU. One row
per case: PASS/FAIL and the max error; exit 1 on any FAIL.

    python bench/emulation/cta_pair_check.py
"""
from __future__ import annotations

import contextlib
import io
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def main() -> int:
    import torch

    from arena.blackwell import runtime
    runtime.install(torch)
    from torch.utils.cpp_extension import load_inline
    source = open(os.path.join(ROOT, "tests", "blackwell", "cta_pair_gemm.cu")).read()
    declaration = ("void gemm(torch::Tensor a, torch::Tensor b, torch::Tensor sfa, torch::Tensor sfb, torch::Tensor d, "
                   "int64_t kind, int64_t idesc, int64_t kb);\n"
                   "void tma_probe(torch::Tensor src, torch::Tensor out, torch::Tensor flags, int64_t mode);")
    start = time.time()
    module = load_inline("emulated_cta_pair", cpp_sources=declaration, cuda_sources=source,
                         functions=["gemm", "tma_probe"], extra_ldflags=["-lcuda"],
                         extra_cuda_cflags=["-gencode=arch=compute_100a,code=sm_100a", "-O2"])
    print(f"built in {time.time() - start:.0f} s", flush=True)
    torch.manual_seed(0)
    failures = 0

    def run(name, kind, idesc, kb, a, b, sfa, sfb, m, n, expected, warning=""):
        nonlocal failures
        d = torch.full((m, n), float("nan"), device="cuda")
        t0 = time.time()
        try:
            module.gemm(a.cuda(), b.cuda(), sfa.cuda(), sfb.cuda(), d, kind, idesc, kb)
            torch.cuda.synchronize()
            with contextlib.redirect_stderr(io.StringIO()) as said:     # the emulation's warnings
                runtime.raise_on_error()
        except Exception as error:   # one line: the emulation's own error names the instruction
            failures += 1
            print(f"FAIL {name}: {str(error).splitlines()[0]}", flush=True)
            return
        warned = " ".join(said.getvalue().split())
        got = d.cpu().double()
        err = ((got - expected).abs() / expected.abs().clamp_min(1.0)).max().item()
        ok = err < 1e-5 and warning in warned
        failures += not ok
        said = f", warned: {warned[:160]}" if warned else ""
        print(f"{'PASS' if ok else 'FAIL'} {name} {m}x{n}x{kb} MMAs: max rel err {err:.2e}{said} "
              f"({time.time() - t0:.1f} s)", flush=True)

    # kind::f16 (bf16), K = 16 per MMA, with CUTLASS's all-zero 8-register disable-output-lane mask
    m, n, kb = 256, 256, 2
    a = torch.randn(m, 16 * kb).to(torch.bfloat16)
    b = torch.randn(n, 16 * kb).to(torch.bfloat16)
    expected = a.double() @ b.double().T
    raw = lambda x: x.contiguous().view(torch.uint8).reshape(x.shape[0], 32 * kb)  # noqa: E731
    idesc = (1 << 4) | (1 << 7) | (1 << 10) | ((128 >> 3) << 17) | ((256 >> 4) << 24)
    empty = torch.zeros(1, dtype=torch.uint8)
    run("kind::f16 bf16 cta_group::2", 0, idesc, kb, raw(a), raw(b), empty, empty, m, n, expected)

    # kind::mxf4nvf4.block_scale.block16: e2m1 codes packed two per byte (element 0 in the low nibble), UE4M3 scales
    m, n, kb = 256, 128, 2
    k = 64 * kb
    ca, cb = torch.randint(0, 16, (m, k)), torch.randint(0, 16, (n, k))
    value = torch.tensor([(-1.0 if c & 8 else 1.0) * E2M1[c & 7] for c in range(16)], dtype=torch.float64)
    pack = lambda c: (c[:, 0::2] | (c[:, 1::2] << 4)).to(torch.uint8)  # noqa: E731
    scales = lambda rows: (2.0 ** torch.randint(-3, 4, (rows, k // 16)).float()  # noqa: E731
                           * torch.tensor([1.0, 1.25, 1.5, 1.75])[torch.randint(0, 4, (rows, k // 16))]
                           ).to(torch.float8_e4m3fn)
    sa, sb = scales(m), scales(n)
    av = value[ca] * sa.double().repeat_interleave(16, 1)
    bv = value[cb] * sb.double().repeat_interleave(16, 1)
    expected = av @ bv.T
    idesc = (1 << 7) | (1 << 10) | ((128 >> 3) << 17) | (2 << 27)
    run("kind::mxf4nvf4 block16 cta_group::2 (cp 32x128b.warpx4)", 1, idesc, kb, pack(ca), pack(cb),
        sa.view(torch.uint8), sb.view(torch.uint8), m, n, expected)
    # the same tiles, each CTA alone (.cta_group::1, M = 128) in clusters of 2: the odd CTA's descriptors must
    # address its own shared memory
    idesc_one = (1 << 7) | (1 << 10) | ((128 >> 3) << 17) | (1 << 27)      # M = 128 (bits 27-28: M / 128)
    run("kind::mxf4nvf4 block16 cta_group::1 in clusters of 2", 2, idesc_one, kb, pack(ca), pack(cb),
        sa.view(torch.uint8), sb.view(torch.uint8), m, n, expected)
    # the odd CTA issues the pair's MMAs as well, never committing them: the even CTA's alone count (a warning)
    run("kind::mxf4nvf4 block16 cta_group::2, the odd CTA issuing too", 3, idesc, kb, pack(ca), pack(cb),
        sa.view(torch.uint8), sb.view(torch.uint8), m, n, expected, warning="issued by the odd CTA of its pair")

    # TMA .cta_group::2: CTA r loads rows [16 r, +16) x 64 bytes, completing on the even CTA's mbarrier; unicast
    # into its own box r, multicast into box r of both CTAs
    src = torch.randint(0, 256, (32, 64), dtype=torch.uint8, device="cuda")
    for multicast, unsized in ((0, 0), (1, 0), (0, 1), (1, 1)):
        name = ("TMA .cta_group::2" + (".multicast::cluster (mask 0b11)" if multicast else "")
                + (", map's box bytes (word 16) at 0 as CuTe DSL encodes it" if unsized else ""))
        out = torch.zeros(2, 2, 16, 64, dtype=torch.uint8, device="cuda")
        flags = torch.zeros(2, dtype=torch.int32, device="cuda")
        try:
            module.tma_probe(src, out, flags, multicast | unsized << 1)
            torch.cuda.synchronize()
            runtime.raise_on_error()
            completed = flags[0].item() == 1
            boxes = src.view(2, 16, 64)
            same = all(torch.equal(out[cta, r], boxes[r]) for cta in range(2) for r in range(2)
                       if multicast or r == cta)
            ok = completed and same
            why = "" if ok else (" (the even CTA's mbarrier never completed within 2 s)" if not completed
                                 else " (the boxes differ from the source)")
            print(f"{'PASS' if ok else 'FAIL'} {name}, every box on the even CTA's mbarrier{why}", flush=True)
        except Exception as error:
            ok = False
            print(f"FAIL {name}: {str(error).splitlines()[0]}", flush=True)
        failures += not ok
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
