"""Cluster launch control (clusterlaunchcontrol.try_cancel / query_cancel) under --emulate-blackwell's runtime: our
own persistent look-alike (tests/blackwell/clc.cu, `clc_tiles`: each CTA does its own tile, then asks for a cluster
not yet started and does that one's tiles, until a cancel fails) built for sm_100a through the emulation toolchain.
One CTA per SM (200 KB of shared memory each), 1024 CTAs, in clusters of 1 and of 2 (the multicast response).

A B200 never launches a canceled cluster, so every tile is done exactly once by far fewer CTAs than the grid
holds. One row per launch: PASS when every tile ran exactly once and fewer CTAs than the grid started, with the
CTAs that started and the highest blockIdx.x among them; exit 1 on a FAIL. Needs a Hopper GPU.

    python bench/emulation/clc_check.py
"""
from __future__ import annotations

import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
CTAS = 1024


def main() -> int:
    import torch

    from arena.blackwell import runtime
    runtime.install(torch)
    from torch.utils.cpp_extension import load_inline
    source = open(os.path.join(ROOT, "tests", "blackwell", "clc.cu")).read()
    start = time.time()
    module = load_inline("emulated_clc", cpp_sources="void tiles(torch::Tensor tiles, torch::Tensor started, "
                         "int64_t ctas, int64_t multicast);", cuda_sources=source, functions=["tiles"],
                         extra_cuda_cflags=["-gencode=arch=compute_100a,code=sm_100a", "-O2"])
    print(f"built in {time.time() - start:.0f} s", flush=True)
    failures = 0
    for multicast in (0, 1):
        name = f"{CTAS} CTAs in clusters of {2 if multicast else 1}" + (" (multicast response)" if multicast else "")
        tiles = torch.zeros(CTAS, dtype=torch.int32, device="cuda")
        started = torch.zeros(2, dtype=torch.int32, device="cuda")
        try:
            module.tiles(tiles, started, CTAS, multicast)
            torch.cuda.synchronize()
            runtime.raise_on_error()
        except Exception as error:    # one line: the emulation's own error names the instruction
            failures += 1
            print(f"FAIL {name}: {str(error).splitlines()[0]}", flush=True)
            continue
        once = int((tiles == 1).sum())
        ran, highest = int(started[0]), int(started[1])
        ok = once == CTAS and ran < CTAS
        failures += not ok
        why = "" if ok else (f" ({CTAS - once} tiles not done exactly once)" if once != CTAS
                             else " (every CTA of the grid ran: no cancel succeeded)")
        print(f"{'PASS' if ok else 'FAIL'} {name}: {once} of {CTAS} tiles done once, {ran} CTAs started, highest "
              f"blockIdx.x {highest}{why}", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
