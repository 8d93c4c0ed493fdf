"""Print each timed window of a JSON report (eval.py ... --json): what the parent's floor is made of.

    python bench/integrity/window_table.py report.json [...]

Per window (us): the parent's clock on the submission's window and on the clean worker's, their difference
(the floor), the reported total, and each worker's own account of its timed loop and its host's enqueueing.
A floor far above the reported total while the loops agree with it points at time spent outside the loop
(messages, the guard); loops that differ by more than the reported total point at the GPU's work ahead.
"""
from __future__ import annotations

import json
import sys


def main(paths: list[str]) -> int:
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        for case in doc.get("cases", []):
            timing = case.get("timing") or {}
            rows = timing.get("windows_us") or []
            print(f"{path} case {case.get('index')}: floor/call {timing.get('parent_clock_ns_per_call', 0) / 1e3:.2f} us,"
                  f" bound {timing.get('parent_clock_bound')}, {case.get('error') or 'passed'}"[:200])
            print(f"  {'span':>9} {'clean':>9} {'floor':>8} {'reported':>8} {'loop':>9} {'cleanloop':>9} "
                  f"{'loopdiff':>8} {'host':>8} {'cleanhost':>9}")
            for span, clean, reported, loop, clean_loop, host, clean_host in rows:
                diff = (loop - clean_loop) if loop is not None and clean_loop is not None else float("nan")
                print(f"  {span:9.1f} {clean:9.1f} {span - clean:8.1f} {reported:8.1f} {loop or 0:9.1f} "
                      f"{clean_loop or 0:9.1f} {diff:8.1f} {host or 0:8.1f} {clean_host or 0:9.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
