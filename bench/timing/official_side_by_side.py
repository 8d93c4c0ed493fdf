"""Our benchmark beside the competition's own eval.py, on one GPU, the same submissions and shapes.

    python bench/timing/official_side_by_side.py --official-eval PATH/eval_better_bench.py [--runs 5] [SUBMISSION ...]

The official files are fetched by the user, never committed here: for nvfp4_gemm the competition ran
problems/nvidia/eval_better_bench.py with problems/nvidia/utils.py (its task.yml names both), from
github.com/gpu-mode/reference-kernels. The official eval.py runs with the official utils.py (it holds the
official L2 flush, a 62.5 GiB randn) and our reference.py and task.py: the official reference calls NVFP4
torch._scaled_mm, which only a Blackwell has. Beside the task's benchmark shapes one small shape (the first
test shape, a few microseconds) shows how each harness treats a fast kernel. Each submission runs `--runs` times under each harness,
alternating, over task.yml's benchmark shapes. The official eval.py imports `cutlass.cute.nvgpu.common.OpError`;
where CuTe DSL is missing a two-line stand-in module is put on its path (it only names the exception). Prints per shape the median and the spread
((max - min) / median) of each harness's mean, the difference, and the GPU clocks seen around each run.
"""
from __future__ import annotations

import argparse
import json
import shutil
import signal
import statistics
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from arena.clock.gpustate import GpuMonitor, reason_names  # noqa: E402
from tests.evalrun import run_eval  # noqa: E402


def benchmark_specs() -> str:
    task = yaml.safe_load((ROOT / "task.yml").read_text())
    cases = task["benchmarks"] + task["tests"][:1]
    return "\n".join("; ".join(f"{k}: {v}" for k, v in case.items()) for case in cases) + "\n"


def gpu_state(monitor: GpuMonitor | None) -> str:
    """One NVML reading (the reader the evaluator itself uses), as a line for the JSON."""
    if monitor is None:
        return "?"
    r = monitor.read()
    return (f"SM {r.sm_mhz} MHz, memory {r.mem_mhz} MHz, {r.power_w:.0f} W, {r.temp_c} C, "
            f"reasons {','.join(reason_names(r.reasons)) or 'none'}")


def official_folder(official_eval: Path, official_utils: Path, submission: Path, scratch: Path) -> Path:
    folder = scratch / "official"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    shutil.copy(official_eval, folder / "eval.py")
    shutil.copy(official_utils, folder / "utils.py")
    for name in ("reference.py", "task.py", "task.yml"):     # task.yml: the tolerance reference.py reads
        shutil.copy(ROOT / name, folder / name)
    shutil.copy(submission, folder / "submission.py")
    try:
        import cutlass.cute.nvgpu.common  # noqa: F401
    except Exception:
        stub = folder / "cutlass" / "cute" / "nvgpu"
        stub.mkdir(parents=True)
        for part in (folder / "cutlass", folder / "cutlass" / "cute", stub):
            (part / "__init__.py").write_text("")
        (stub / "common.py").write_text("class OpError(Exception):\n    pass\n")
    return folder


def means_us(keys: dict) -> list[float | None]:
    count = int(keys.get("benchmark-count", 0))
    return [float(keys[f"benchmark.{i}.mean"]) / 1e3 if f"benchmark.{i}.mean" in keys else None
            for i in range(count)]


def summarize(values: list[float]) -> str:
    if not values:
        return "—"
    median = statistics.median(values)
    spread = 100 * (max(values) - min(values)) / median
    return f"{median:8.2f} ±{spread:4.1f}%"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--official-eval", type=Path, required=True, help="the official eval.py to run")
    parser.add_argument("--official-utils", type=Path,
                        help="the official utils.py (default: the one beside the eval file)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=400)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--also-no-sandbox", action="store_true",
                        help="also run ours with --no-sandbox (what the isolation costs, beside the rest)")
    parser.add_argument("submissions", nargs="*", type=Path, default=[ROOT / "submission.py"])
    args = parser.parse_args()
    official_utils = (args.official_utils or args.official_eval.parent / "utils.py").resolve()
    flush = [line.strip() for line in official_utils.read_text().splitlines() if "dummy = " in line]
    print(f"official: {args.official_eval} with {official_utils} (flush: {' | '.join(flush) or '?'})")
    scratch = Path(tempfile.mkdtemp(prefix="side-by-side-"))
    spec = scratch / "benchmarks.txt"
    spec.write_text(benchmark_specs())
    shapes = [line.split("; seed")[0] for line in spec.read_text().splitlines()]
    rows, record = [], []
    # A time limit (SIGTERM from `timeout`) still prints the table of the runs finished so far.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    stopped = False
    monitor = GpuMonitor.open(0)   # None without NVML: the clock columns read '?'
    for submission in args.submissions:
        submission = submission.resolve()
        folder = official_folder(args.official_eval.resolve(), official_utils, submission, scratch)
        harnesses = ("official", "ours") + (("ours --no-sandbox",) if args.also_no_sandbox else ())
        runs = {harness: [] for harness in harnesses}
        try:
            for attempt in range(args.runs):
                for harness in harnesses:
                    before = gpu_state(monitor)
                    if harness == "official":
                        result = run_eval("benchmark", str(spec), script="eval.py", cwd=folder, popcorn=True,
                                          env={"PYTHONPATH": str(ROOT)}, timeout=args.timeout, check_timeout=False)
                    else:
                        result = run_eval("benchmark", str(spec), "--submission", str(submission),
                                          *harness.split()[1:], popcorn=True, json_report=True,
                                          timeout=args.timeout, check_timeout=False)
                        clocks = [c.get("timing", {}).get("gpu") for c in (result.doc or {}).get("cases", [])]
                        before += f"; clocks while timing {[(c['sm_mhz_min'], c['sm_mhz_max']) for c in clocks if c]}"
                    after = gpu_state(monitor)
                    code, keys, output = result.code, result.keys, result.stdout + result.stderr
                    figures = means_us(keys)
                    runs[harness].append(figures)
                    record.append({"submission": submission.name, "harness": harness, "run": attempt, "exit": code,
                                   "means_us": figures, "gpu_before": before, "gpu_after": after,
                                   "tail": output.strip().splitlines()[-3:] if code else []})
                    print(f"{submission.name} {harness} run {attempt}: exit {code}, "
                          f"{' / '.join(f'{m:.2f}' if m else '—' for m in figures)} us; gpu {before} -> {after}",
                          flush=True)
        except KeyboardInterrupt:
            stopped = True
            print("stopped early: the table holds the finished runs", flush=True)
        for i, shape in enumerate(shapes):
            official = [r[i] for r in runs["official"] if i < len(r) and r[i]]
            for harness in harnesses[1:]:
                ours = [r[i] for r in runs[harness] if i < len(r) and r[i]]
                diff = (f"{100 * (statistics.median(ours) / statistics.median(official) - 1):+5.1f}%"
                        if official and ours else "—")
                rows.append((submission.name, shape, summarize(official), harness, summarize(ours), diff))
        if stopped:
            break
    print(f"\n{'submission':<22} {'shape':<32} {'official (us, spread)':>22} {'harness':<17} "
          f"{'(us, spread)':>16} {'vs official':>11}")
    for row in rows:
        print(f"{row[0]:<22} {row[1]:<32} {row[2]:>22} {row[3]:<17} {row[4]:>16} {row[5]:>11}")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "runs": record}, indent=2))


if __name__ == "__main__":
    main()
