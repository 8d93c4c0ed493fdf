"""tcgen05.alloc on a Hopper GPU under --emulate-blackwell's runtime, in three kernels of our own:

- `base_zero` (tests/blackwell/tmem_base_zero.cu): one CTA per SM uses tensor memory from column 0 without reading
  tcgen05.alloc's result. Every CTA must read back its own values with no emulation error, as on a B200, which
  hands out the lowest free columns.
- `deadlock` (tests/blackwell/alloc_deadlock.cu): many CTAs per SM each allocate 256 columns, then 32 more. Two
  CTAs holding all 512 columns both wait for more: the emulation must name the deadlock (a B200 hangs there)
  and let the call end.
- `waits`: the same kernel without the second alloc. CTAs wait for each other's columns, which come free: no
  error, every CTA right.

    python3 bench/emulation/alloc_check.py [base_zero|deadlock|waits ...]     (default: all three; 8 CTAs per SM)

Prints one JSON line per kernel: CTAs, CTAs whose 128 lanes read their own value, seconds, the emulation's error
and warnings. Exit 1 unless every kernel behaves as described.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

FLAGS = ["-gencode=arch=compute_100a,code=sm_100a", "-O2"]
DEADLOCK_WORDS = "can never be served: every CTA holding this SM's tensor memory is itself waiting in tcgen05.alloc"


def build(torch, name: str):
    from torch.utils.cpp_extension import load_inline
    if name == "base_zero":
        source = open(os.path.join(ROOT, "tests", "blackwell", "tmem_base_zero.cu")).read()
        return load_inline("emulated_tmem_base_zero", cpp_sources="void run(torch::Tensor out);",
                           cuda_sources=source, functions=["run"], extra_cuda_cflags=FLAGS)
    source = open(os.path.join(ROOT, "tests", "blackwell", "alloc_deadlock.cu")).read()
    return load_inline("emulated_alloc_deadlock", cpp_sources="void run(torch::Tensor out, int64_t second, "
                       "int64_t hold_us);", cuda_sources=source, functions=["run"], extra_cuda_cflags=FLAGS)


def check(torch, name: str, module) -> dict:
    from arena.blackwell import runtime
    ctas = 8 * torch.cuda.get_device_properties(0).multi_processor_count
    out = torch.zeros(ctas, dtype=torch.int32, device="cuda")
    err, error = io.StringIO(), ""
    start = time.perf_counter()
    with contextlib.redirect_stderr(err):
        if name == "base_zero":
            module.run(out)
        else:
            module.run(out, 32 if name == "deadlock" else 0, 10_000)
        torch.cuda.synchronize()
        try:
            runtime.raise_on_error()
        except runtime.EmulationError as e:
            error = str(e)
    seconds = round(time.perf_counter() - start, 2)
    right = int((out == 128).sum())
    ok = DEADLOCK_WORDS in error if name == "deadlock" else (right == ctas and not error)
    return {"kernel": name, "ok": ok, "ctas": ctas, "right": right, "seconds": seconds, "error": error,
            "warning": err.getvalue().strip()}


def main() -> int:
    import torch

    from arena.blackwell import runtime
    runtime.install(torch)
    names = sys.argv[1:] or ["base_zero", "deadlock", "waits"]
    modules: dict[str, object] = {}
    failed = False
    for name in names:
        key = "base_zero" if name == "base_zero" else "alloc_deadlock"
        if key not in modules:
            modules[key] = build(torch, name)
        got = check(torch, name, modules[key])
        failed = failed or not got["ok"]
        print(json.dumps(got), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
