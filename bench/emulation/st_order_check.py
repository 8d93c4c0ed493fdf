"""tcgen05.st of scale factors by four warps, then one warp's MMA, in five orders (tests/blackwell/st_scales.cu),
under --emulate-blackwell's runtime on a Hopper GPU. Each order runs in a process of its own (the library keeps the
first warning of a process) and is checked against torch:

    order     warps' stores vs the MMA                          expected here (and on a B200)
    barrier   all stored, then a CTA barrier                     right, no emulation line
    late      warps 1-3 store 200 us after the MMA's issue       rows 32-127 wrong, a warning naming the late store
    early     warps 1-3 stored before it, no barrier             right, a warning naming the missing barrier
    mbarrier  warps 1-3 store, arrive; thread 0 waits            right, no emulation line
    copy      an uncommitted tcgen05.cp of zeros into the scales  right (the stores win), a warning naming the copy
              first, then the stores and a barrier

Prints one row per order; exit 1 on any row that is not as expected.

    python3 bench/emulation/st_order_check.py
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
ORDERS = {"barrier": 0, "late": 1, "early": 2, "mbarrier": 3, "copy": 4}
EXPECTED = {  # order -> (rows that are right, words of the warning or None)
    "barrier": ("0-127", None),
    "late": ("0-31", "writes tensor memory that"),
    "early": ("0-127", "no barrier orders that store before the MMA"),
    "mbarrier": ("0-127", None),
    "copy": ("0-127", "also writes, issued earlier with nothing completing it first"),
}
E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def one(order: str) -> dict:
    """Runs one order in this process: which row blocks of 32 are right, and the emulation's lines."""
    import io
    import contextlib
    import torch

    from arena.blackwell import runtime
    runtime.install(torch)
    from torch.utils.cpp_extension import load_inline
    source = open(os.path.join(ROOT, "tests", "blackwell", "st_scales.cu")).read()
    declaration = ("void run(torch::Tensor a, torch::Tensor b, torch::Tensor sfa, torch::Tensor sfb, torch::Tensor d, "
                   "int64_t mode);")
    module = load_inline("emulated_st_scales", cpp_sources=declaration, cuda_sources=source, functions=["run"],
                         extra_cuda_cflags=["-gencode=arch=compute_100a,code=sm_100a", "-O2"])
    gen = torch.Generator().manual_seed(1)
    codes_a = torch.randint(0, 16, (128, 64), generator=gen)
    codes_b = torch.randint(0, 16, (128, 64), generator=gen)
    pack = lambda c: (c[:, 0::2] | (c[:, 1::2] << 4)).to(torch.uint8)  # noqa: E731  low nibble first
    value = lambda c: torch.tensor(E2M1, dtype=torch.float64)[c & 7] * (1 - 2 * (c >> 3)).double()  # noqa: E731
    # e4m3 scales 0.5 .. 4 (exact powers of two and halves), 4 K blocks of 16 per row
    scale_codes = torch.randint(0, 4, (2, 128, 4), generator=gen)
    scale_bytes = (0x30 + 8 * scale_codes).to(torch.uint8)                 # e4m3 0x30 = 0.5, 0x38 = 1, ...
    scales = scale_bytes.view(torch.float8_e4m3fn).double()
    words = lambda s: s.contiguous().view(torch.int32).reshape(128)  # noqa: E731
    a_vals = value(codes_a) * scales[0].repeat_interleave(16, dim=1)
    b_vals = value(codes_b) * scales[1].repeat_interleave(16, dim=1)
    expected = (a_vals @ b_vals.T).float()
    d = torch.zeros(128, 128, dtype=torch.float32, device="cuda")
    err = io.StringIO()
    error = ""
    with contextlib.redirect_stderr(err):
        module.run(pack(codes_a).cuda(), pack(codes_b).cuda(), words(scale_bytes[0]).cuda(),
                   words(scale_bytes[1]).cuda(), d, ORDERS[order])
        torch.cuda.synchronize()
        try:
            runtime.raise_on_error()
        except runtime.EmulationError as e:
            error = str(e)
    got = d.cpu()
    right = [bool(torch.equal(got[32 * q:32 * q + 32], expected[32 * q:32 * q + 32])) for q in range(4)]
    return {"right": right, "error": error, "warning": err.getvalue().strip()}


def rows(right: list[bool]) -> str:
    if all(right):
        return "0-127"
    if right == [True, False, False, False]:
        return "0-31"
    return ",".join(f"{32 * q}-{32 * q + 31}" for q, ok in enumerate(right) if ok) or "none"


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--one":
        print(json.dumps(one(sys.argv[2])))
        return 0
    failures = 0
    print("order    | rows right | as expected | emulation line")
    for order in ORDERS:
        done = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", order], capture_output=True,
                              text=True, timeout=900)
        try:
            got = json.loads(done.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            failures += 1
            print(f"{order:8s} | -          | NO          | no result: {(done.stderr.strip() or 'nothing')[-300:]}")
            continue
        want_rows, want_words = EXPECTED[order]
        line = got["error"] or got["warning"]
        ok = rows(got["right"]) == want_rows and not got["error"] and (
            (want_words is None and not got["warning"]) or (want_words is not None and want_words in got["warning"]))
        failures += not ok
        print(f"{order:8s} | {rows(got['right']):10s} | {'yes' if ok else 'NO':11s} | {line[:240]}", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
