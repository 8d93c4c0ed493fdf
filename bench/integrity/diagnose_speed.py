"""How long the bug hypotheses take on a large failing case, on this machine (the aim: <= 2 s at
1024x1024x4096 on a CPU), and which hypothesis each broken submission gets.

    python bench/integrity/diagnose_speed.py [--shape 1024 1024 4096] [NAME ...]   (names from tests/broken/)
"""
import argparse
import importlib.util
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests", "broken")]

import torch  # noqa: E402

import reference  # noqa: E402
from arena.diagnose import hypotheses  # noqa: E402
from arena.taskdef.nested import clone_data  # noqa: E402

DEFAULT = ["layout_view_k_order", "layout_view_rows_order", "layout_kgroup_swapped", "layout_rows_plain",
           "scales_ignored", "nibble_swap_a"]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", type=int, nargs=3, default=(1024, 1024, 4096))
    ap.add_argument("names", nargs="*", default=DEFAULT)
    args = ap.parse_args()
    m, n, k = args.shape
    device = "cuda" if torch.cuda.is_available() else "cpu"
    data = reference.generate_input(m=m, n=n, k=k, l=1, seed=3)
    expected = reference.ref_kernel(clone_data(data))
    rows = []
    for name in args.names:
        spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "tests", "broken", name + ".py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        out = module.custom_kernel(clone_data(data))
        start = time.perf_counter()
        matches, _ = hypotheses.gemm_hypotheses(data, out, expected)
        rows.append((name, time.perf_counter() - start, len(matches), matches[0].key, matches[0].agree))
    print(f"\n{m}x{n}x{k} on {device} ({torch.get_num_threads()} threads), torch {torch.__version__}")
    print(f"{'broken submission':28s} {'seconds':>8s} {'hypotheses':>10s}  best (agreement)")
    for name, seconds, count, key, agree in rows:
        print(f"{name:28s} {seconds:8.2f} {count:10d}  {key} ({100 * agree:.1f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
