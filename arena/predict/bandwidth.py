"""This GPU's DRAM bandwidth, measured in the trusted parent before predict mode's cases: the B200 time of a call
that ran natively here scales its DRAM floor by the ratio of the two GPUs' bandwidths (b200.NativeTiming)."""
from __future__ import annotations

import math

COPY_MIB = 512          # far beyond any L2 (50 MB on an H100, 60 MB on an H200)
REPEATS = 10


def dram_gbps(torch, mib: int = COPY_MIB, repeats: int = REPEATS) -> float:
    """The best of `repeats` device-to-device copies of `mib` MiB, read and write both counted (GB/s). The best,
    since another process on the same GPU can only slow a copy."""
    count = mib * 2**20 // 4
    source = torch.ones(count, dtype=torch.float32, device="cuda")
    target = torch.empty_like(source)
    target.copy_(source)
    best_ms = math.inf
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        target.copy_(source)
        end.record()
        end.synchronize()
        best_ms = min(best_ms, start.elapsed_time(end))
    del source, target
    torch.cuda.empty_cache()
    return 2 * count * 4 / (best_ms * 1e-3) / 1e9
