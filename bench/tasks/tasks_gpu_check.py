"""Run every task's tests with its example submission on this machine's GPU and print one table.

    python bench/tasks/tasks_gpu_check.py                      # tests + robustness of all four tasks
    python bench/tasks/tasks_gpu_check.py --sets tests --tasks nvfp4_group_gemm
    python bench/tasks/tasks_gpu_check.py --benchmark          # also a short benchmark run per task

Each row is one real `python eval.py test --task DIR --submission EXAMPLE --set SET --json FILE` run.
Before that, each task's generator is called once in this process to check where its tensors live on a
GPU (fp4 operands, c and permuted scales on CUDA; group gemm's plain scales on the CPU). On sm_100+ the
references call torch._scaled_mm as the competition does; elsewhere they use the exact emulation.
Exit status 0 when every run passed.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
from tests.evalrun import run_eval  # noqa: E402
TASKS = {
    "nvfp4_gemm": (ROOT, os.path.join(ROOT, "submissions", "torch_reference.py")),
    "nvfp4_gemv": (os.path.join(ROOT, "tasks", "nvfp4_gemv"), os.path.join(ROOT, "tasks", "nvfp4_gemv", "torch_submission.py")),
    "nvfp4_dual_gemm": (os.path.join(ROOT, "tasks", "nvfp4_dual_gemm"),
                        os.path.join(ROOT, "tasks", "nvfp4_dual_gemm", "torch_submission.py")),
    "nvfp4_group_gemm": (os.path.join(ROOT, "tasks", "nvfp4_group_gemm"),
                         os.path.join(ROOT, "tasks", "nvfp4_group_gemm", "torch_submission.py")),
}


def _load_reference(folder: str):
    """The task's reference module, imported with that task's task.py (names `task`/`reference` reused)."""
    for name in ("task", "reference"):
        sys.modules.pop(name, None)
    for path in (ROOT, folder):
        if path in sys.path:
            sys.path.remove(path)
        sys.path.insert(0, path)
    spec = importlib.util.spec_from_file_location("reference", os.path.join(folder, "reference.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules["reference"] = module
    spec.loader.exec_module(module)
    return module


def _tensors(x, path="data"):
    import torch
    if isinstance(x, torch.Tensor):
        yield path, x
    elif isinstance(x, (list, tuple)):
        for i, item in enumerate(x):
            yield from _tensors(item, f"{path}[{i}]")


def device_placement(name: str) -> str:
    """'ok' when the first test's tensors live where the competition puts them, else the first surprise."""
    import torch
    folder, _ = TASKS[name]
    try:
        from arena.taskdef.definition import load_task
        args = load_task(folder).cases("tests")[0].args
        data = _load_reference(folder).generate_input(**args)
    except Exception as error:      # report, keep going with the other tasks
        return f"generator failed: {type(error).__name__}: {error}"
    want = "cuda" if torch.cuda.is_available() else "cpu"
    for path, t in _tensors(data):
        on_cpu = name == "nvfp4_group_gemm" and path.startswith("data[1]")     # sfasfb_tensors: CPU scales
        expected = "cpu" if on_cpu else want
        if t.device.type != expected:
            return f"{path} is on {t.device.type}, expected {expected}"
    return "ok"


def run_task(mode: str, name: str, case_set: str, extra: list[str]) -> dict:
    folder, example = TASKS[name]
    run = run_eval(mode, "--task", folder, "--submission", example, "--set", case_set, *extra, json_report=True,
                   timeout=3600)
    row = {"task": name, "mode": mode, "set": case_set, "code": run.code,
           "seconds": run.seconds, "passed": 0, "total": 0, "note": ""}
    try:
        doc = run.doc
        cases = doc["cases"]
        row.update(passed=sum(c["passed"] for c in cases), total=len(cases), system=doc.get("system", {}))
        failed = [c for c in cases if not c["passed"]]
        if failed:
            row["note"] = f"case {failed[0]['index']}: {failed[0]['error']}"
        elif mode == "benchmark" and doc.get("geomean_us") is not None:
            row["note"] = f"geomean {doc['geomean_us']:.1f} us (pure PyTorch example)"
    except (TypeError, KeyError):
        tail = (run.stderr or run.stdout).strip().splitlines()
        row["note"] = f"no report (exit {run.code}): {tail[-1] if tail else 'no output'}"
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default=",".join(TASKS), help="comma-separated task names")
    parser.add_argument("--sets", default="tests,robustness", help="comma-separated case sets for `test`")
    parser.add_argument("--benchmark", action="store_true", help="also run a short `benchmark` per task")
    args = parser.parse_args()
    sys.path.insert(0, ROOT)
    import torch

    names = [n for n in args.tasks.split(",") if n]
    unknown = [n for n in names if n not in TASKS]
    if unknown:
        parser.error(f"unknown task {unknown[0]!r}: choose from {', '.join(TASKS)}")
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        blackwell = props.major >= 10
        print(f"GPU: {props.name} (sm_{props.major}{props.minor}); reference: "
              f"{'torch._scaled_mm (as the competition)' if blackwell else 'exact emulation (fp32, TF32 off)'}; "
              f"torch {torch.__version__}")
    else:
        print(f"no CUDA GPU: running on the CPU (this script is meant for a GPU machine); torch {torch.__version__}")

    rows, placement = [], {}
    for name in names:
        placement[name] = device_placement(name)
        for case_set in [s for s in args.sets.split(",") if s]:
            rows.append(run_task("test", name, case_set, []))
            print(f"  ran {name} test --set {case_set}: {rows[-1]['passed']}/{rows[-1]['total']} "
                  f"in {rows[-1]['seconds']:.0f} s", flush=True)
        if args.benchmark:
            rows.append(run_task("benchmark", name, "benchmarks", ["--max-runs", "10", "--max-time", "3"]))

    header = ("task", "mode", "set", "passed", "exit", "seconds", "tensor devices", "note")
    table = [(r["task"], r["mode"], r["set"], f"{r['passed']}/{r['total']}", str(r["code"]), f"{r['seconds']:.1f}",
              placement[r["task"]], r["note"][:100]) for r in rows]
    widths = [max(len(h), *(len(row[i]) for row in table)) for i, h in enumerate(header)]
    print()
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    print("  ".join("-" * w for w in widths))
    for row in table:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths)))
    good = all(r["code"] == 0 and r["total"] > 0 and r["passed"] == r["total"] for r in rows) and \
        all(p == "ok" for p in placement.values())
    print("\nall passed" if good else "\nSOME RUNS FAILED")
    sys.exit(0 if good else 1)


if __name__ == "__main__":
    main()
