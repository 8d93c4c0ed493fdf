"""What the benchmark loop costs per timed call on this GPU: the L2 flush (2x L2 write), the GPU-side wait,
and an empty timed window behind them. Prints a table (median of 200 events each).
Usage: python bench/timing/timing_overhead.py
"""
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from arena.clock import timing
from arena.clock.parent_clock import SpinSizer  # noqa: E402


def event_median(enqueue, repeats=200) -> float:
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        enqueue()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


def main():
    props = torch.cuda.get_device_properties(0)
    flush = timing.l2_flush_buffer()
    timing.clear_l2_cache()
    sizer = SpinSizer()
    rows = [
        ("L2 flush: write of 2x L2", event_median(flush.zero_), f"{flush.numel() * 4 / 2**20:.0f} MiB"),
        ("GPU work ahead, asked for 20 us", event_median(lambda: timing.busy_spin(sizer.size(20))), ""),
        ("GPU work ahead, asked for 100 us", event_median(lambda: timing.busy_spin(sizer.size(100))), ""),
        ("GPU work ahead, asked for 1000 us", event_median(lambda: timing.busy_spin(sizer.size(1000))), ""),
        ("empty timed window", event_median(lambda: None), ""),
    ]

    def behind_flush():           # what the timed window adds when it follows a flush and a wait
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        flush.zero_()
        timing.busy_spin(sizer.size(20))
        start.record()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1e3
    rows.append(("empty window behind flush + wait", statistics.median(behind_flush() for _ in range(200)), ""))
    print(f"\n{props.name}: L2 {props.L2_cache_size / 2**20:.0f} MiB, {props.multi_processor_count} SMs")
    print(f"{'what':36} {'median us':>10}  note")
    for name, us, note in rows:
        print(f"{name:36} {us:10.2f}  {note}")


if __name__ == "__main__":
    main()
