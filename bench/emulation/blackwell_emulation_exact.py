"""Bit-exactness of a submission's sm_100a path under --emulate-blackwell, in one process (no sandbox).

Installs the same runtime the worker does (arena/blackwell/runtime.py: sm_100a builds through the rewriter,
capability (10, 0)), imports the submission, runs every test case of the task (and --bench, its benchmarks)
and compares each output with the task's reference bit for bit. Prints one row per case and the time each
emulated call took (emulation time, never a benchmark figure).

    python bench/emulation/blackwell_emulation_exact.py [--submission submission.py] [--task .] [--bench]
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--submission", default=os.path.join(ROOT, "submission.py"))
    parser.add_argument("--task", default=ROOT)
    parser.add_argument("--bench", action="store_true", help="also the benchmark shapes")
    args = parser.parse_args()
    import torch

    from arena.blackwell import runtime
    from arena.taskdef.definition import add_task_paths, load_task
    task = load_task(args.task)
    reference = task.import_reference()
    cases = task.cases("tests") + (task.cases("benchmarks") if args.bench else [])
    # Inputs and exact expected outputs first: after install() the process reports sm_100, and the
    # reference would reach for the FP4 tensor cores this GPU does not have.
    prepared = []
    for case in cases:
        data = reference.generate_input(**case.args)
        expected = reference.ref_kernel(tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in data))
        prepared.append((case, data, expected.cpu()))
    torch.cuda.synchronize()
    runtime.install(torch)
    add_task_paths(task.folder)
    sys.path.insert(0, os.path.dirname(os.path.abspath(args.submission)))
    spec = importlib.util.spec_from_file_location("submission", args.submission)
    module = importlib.util.module_from_spec(spec)
    sys.modules["submission"] = module
    spec.loader.exec_module(module)
    rows, exact_all = [], True
    for case, data, expected in prepared:
        start = time.perf_counter()
        try:
            out = module.custom_kernel(data)
            torch.cuda.synchronize()
            runtime.raise_on_error()
            seconds = time.perf_counter() - start
            same = torch.equal(out.cpu(), expected)
            diff = (out.cpu().float() - expected.float()).abs().max().item()
            verdict = "bit-exact" if same else f"differs (max |diff| {diff:g})"
        except Exception as error:
            seconds, same, verdict = time.perf_counter() - start, False, f"{type(error).__name__}: {error}"[:300]
        exact_all &= same
        rows.append((case.spec, f"{seconds:.2f} s", verdict))
        print(f"{case.spec:48s} {seconds:7.2f} s  {verdict}", flush=True)
    print(f"\n{sum(r[2] == 'bit-exact' for r in rows)} of {len(rows)} cases bit-exact "
          f"({os.path.basename(args.submission)}, emulated sm_100a on {torch.cuda.get_device_name()})")
    return 0 if exact_all else 1


if __name__ == "__main__":
    sys.exit(main())
