"""Run a folder of public submissions (third-party code, never committed) through `eval.py test`, unchanged.

The folder holds <problem>/<name>.py files and a MANIFEST.tsv (file, problem, repo, path, commit, kind, notes),
kept out of git (.public/ is ignored; carry it to the GPU machine). Prints one row per submission: its verdict
on this machine, the first failing case's one-line cause, whether torch._scaled_mm was emulated, the seconds.

    python bench/tasks/public_submissions.py .public --jobs 6 --out out/public_cpu.tsv
"""
from __future__ import annotations

import argparse
import csv
import os
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests.evalrun import run_eval  # noqa: E402
TASK_FOLDERS = {"nvfp4_gemm": ROOT, "nvfp4_gemv": ROOT / "tasks" / "nvfp4_gemv",
                "nvfp4_dual_gemm": ROOT / "tasks" / "nvfp4_dual_gemm",
                "nvfp4_group_gemm": ROOT / "tasks" / "nvfp4_group_gemm"}


def run_one(folder: Path, row: dict, timeout: float) -> dict:
    with tempfile.TemporaryDirectory() as scratch:
        run = run_eval("test", "--submission", str(folder / row["file"]), "--task", str(TASK_FOLDERS[row["problem"]]),
                       cwd=scratch, json_report=True, timeout=timeout, check_timeout=False)
    code, stderr, seconds, data = run.code, run.stderr, run.seconds, run.doc or {}
    cases = data.get("cases", [])
    failed = [c for c in cases if not c.get("passed")]
    if code is None:
        verdict, cause = "timeout", f"no result within {timeout:.0f} s"
    elif not cases:
        verdict, cause = f"exit {code}", (stderr.strip().splitlines() or ["(no output)"])[-1]
    elif failed:
        verdict, cause = f"fail {len(cases) - len(failed)}/{len(cases)}", failed[0].get("error", "")
    else:
        verdict, cause = f"pass {len(cases)}/{len(cases)}", ""
    emulated = any("emulated torch._scaled_mm" in n for n in data.get("system", {}).get("notices") or [])
    return {**row, "verdict": verdict, "cause": cause.replace("\t", " ")[:160], "emulated": "yes" if emulated else "",
            "seconds": f"{seconds:.0f}"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--only-kind", default="", help="comma-separated kinds from the manifest")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    args.folder = args.folder.resolve()
    with open(args.folder / "MANIFEST.tsv", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    if args.only_kind:
        rows = [r for r in rows if r["kind"] in args.only_kind.split(",")]
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda r: run_one(args.folder, r, args.timeout), rows))
    columns = ["file", "kind", "verdict", "emulated", "seconds", "cause"]
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with open(args.out, "w", newline="") as f:
            writer = csv.DictWriter(f, columns, delimiter="\t", extrasaction="ignore")
            writer.writeheader()
            writer.writerows(results)
    for r in results:
        print("\t".join(r[c] for c in columns))
    passed = sum(r["verdict"].startswith("pass") for r in results)
    print(f"{passed} of {len(results)} passed on {os.uname().nodename}")


if __name__ == "__main__":
    main()
