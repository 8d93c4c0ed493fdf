"""The precision envelopes' cost against ref_kernel, both timed in this run on each task's test cases:

    python3 bench/tasks/envelope_cost.py [--repeats 3]      (CPU or GPU; prints one row per task)

A row: the task, its test cases, ref_kernel's seconds, the envelope's (`outside` on ref_kernel's own output),
and their ratio (the best of --repeats for each)."""
from __future__ import annotations

import argparse
import os
import sys
import time

import torch
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
from tests.taskload import task_reference  # noqa: E402

ENVELOPES = {"nvfp4_moe": "moe_envelope", "fp8_attention": "attention_envelope"}


def _copy(data):
    return tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in data)


def _sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"{'task':15} {'cases':>5} {'ref_kernel s':>12} {'envelope s':>10} {'ratio':>6}")
    for task, envelope in ENVELOPES.items():
        folder = os.path.join(ROOT, "tasks", task)
        with task_reference(folder) as reference:
            cases = yaml.safe_load(open(os.path.join(folder, "task.yml")))["tests"]
            inputs = [reference.generate_input(**case) for case in cases]
            outputs = [reference.ref_kernel(_copy(data)) for data in inputs]
            best_ref = best_env = float("inf")
            for _ in range(args.repeats):
                _sync(); start = time.perf_counter()
                for data in inputs:
                    reference.ref_kernel(_copy(data))
                _sync(); best_ref = min(best_ref, time.perf_counter() - start)
                start = time.perf_counter()
                for data, out in zip(inputs, outputs):
                    getattr(reference, envelope).outside(data, out)
                _sync(); best_env = min(best_env, time.perf_counter() - start)
        print(f"{task:15} {len(cases):5} {best_ref:12.3f} {best_env:10.3f} {best_env / best_ref:5.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
