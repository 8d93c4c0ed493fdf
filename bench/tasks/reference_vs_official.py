"""GPU check of the references: our generate_input vs the competition's, tensor by tensor,
and our ref_kernel vs an fp64 GEMM on the GPU.

The competition's reference files are NOT part of this repository: copy them (read-only, for comparison)
into .official/<task>_reference.py, an ignored folder, and carry it to the GPU machine. Prints a table.
Usage: python bench/tasks/reference_vs_official.py
"""
import importlib.util
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from arena.taskdef.definition import add_task_paths  # noqa: E402

CASES = {
    "nvfp4_gemm": (ROOT, [dict(m=128, n=256, k=256, l=1, seed=1111), dict(m=256, n=384, k=512, l=2, seed=7),
                          dict(m=128, n=7168, k=16384, l=1, seed=1111), dict(m=2304, n=4608, k=7168, l=1, seed=1111)]),
    "nvfp4_gemv": (os.path.join(ROOT, "tasks", "nvfp4_gemv"), [dict(m=128, k=256, l=1, seed=1111),
                                                               dict(m=4096, k=7168, l=8, seed=1111)]),
    "nvfp4_dual_gemm": (os.path.join(ROOT, "tasks", "nvfp4_dual_gemm"), [dict(m=256, n=512, k=256, l=1, seed=1111),
                                                                         dict(m=256, n=4096, k=7168, l=1, seed=1111)]),
    "nvfp4_group_gemm": (os.path.join(ROOT, "tasks", "nvfp4_group_gemm"),
                         [dict(m=(80, 176), n=(4096, 4096), k=(7168, 7168), g=2, seed=1111),
                          dict(m=(40, 76, 168), n=(7168,) * 3, k=(2048,) * 3, g=3, seed=1111)]),
}

def load(path: str, name: str, folder: str):
    add_task_paths(folder)
    for mod in ("task", "reference", "utils"):
        sys.modules.pop(mod, None)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

def same(x, y, where="") -> str | None:
    """None if x and y are the same nested structure of identical tensors (bytes, shape, stride, dtype, device)."""
    if isinstance(x, (tuple, list)):
        if not isinstance(y, (tuple, list)) or len(x) != len(y):
            return f"{where}: structure differs"
        for i, (a, b) in enumerate(zip(x, y)):
            problem = same(a, b, f"{where}[{i}]")
            if problem:
                return problem
        return None
    if isinstance(x, torch.Tensor):
        for attr in ("dtype", "shape", "device"):
            if getattr(x, attr) != getattr(y, attr):
                return f"{where}: {attr} {getattr(x, attr)} vs {getattr(y, attr)}"
        if x.stride() != y.stride():
            return f"{where}: stride {x.stride()} vs {y.stride()}"
        if not torch.equal(_bytes(x), _bytes(y)):
            return f"{where}: values differ"
        return None
    return None if x == y else f"{where}: {x!r} vs {y!r}"

def _bytes(t: torch.Tensor) -> torch.Tensor:
    """Raw bytes in logical order (1-byte dtypes such as fp4/fp8 are viewed before any copy)."""
    if t.element_size() == 1:
        return t.view(torch.uint8).contiguous().view(-1)
    return t.contiguous().view(-1).view(torch.uint8)

def fp64_check(task: str, ours, data) -> str:
    """Our reference output vs an fp64 GEMM on the GPU (gemm only: the other tasks are checked by their tests)."""
    if task != "nvfp4_gemm":
        return "-"
    from arena.nvfp4.formats import dequantize
    a, b, sfa, sfb, _, _, c = data
    out = ours.ref_kernel(tuple(x.clone() for x in data))
    worst = 0
    for l in range(c.shape[2]):
        exact = dequantize(a[:, :, l], sfa[:, :, l], torch.float64) @ dequantize(b[:, :, l], sfb[:, :, l], torch.float64).T
        worst = max(worst, int((out[:, :, l] != exact.to(torch.float16)).sum()))
    return "bit-identical" if worst == 0 else f"{worst} fp16 values differ"

def main():
    assert torch.cuda.is_available(), "needs a GPU: the official generators run on CUDA"
    rows = []
    for task, (folder, cases) in CASES.items():
        official_path = os.path.join(ROOT, ".official", f"{task}_reference.py")
        if not os.path.isfile(official_path) or not os.path.isfile(os.path.join(folder, "reference.py")):
            rows.append((task, "-", "missing reference file", "-"))
            continue
        official = load(official_path, f"official_{task}", folder)
        ours = load(os.path.join(folder, "reference.py"), f"ours_{task}", folder)
        for args in cases:
            theirs = official.generate_input(**args)
            mine = ours.generate_input(**args)
            torch.cuda.synchronize()
            problem = same(theirs, mine)
            rows.append((task, str(args), "identical" if problem is None else problem, fp64_check(task, ours, mine)))
            del theirs, mine
            torch.cuda.empty_cache()
    print(f"\n{torch.cuda.get_device_name()}  torch {torch.__version__}")
    print(f"{'task':18} {'args':70} {'inputs vs official':28} ref vs fp64")
    for row in rows:
        print(f"{row[0]:18} {row[1]:70} {row[2]:28} {row[3]}")

if __name__ == "__main__":
    main()
