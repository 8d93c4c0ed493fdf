"""The public corpus under --emulate-blackwell: each file's verdict beside its B200 evidence, in one table.

    python3 bench/emulation/public_agreement.py [--jobs N] [--gpus 0,1,2,3] [--limit S] [--out DIR] [FILE ...]

Reads .public-blackwell/MANIFEST.tsv, which bench/emulation/fetch_public.py writes beside the files from the committed
list bench/emulation/public_corpus.tsv (the files of other authors are never committed; columns file, problem,
repo, path, commit, style, expected, and optionally judged_on; `expected` is what the B200 did: pass,
fail, build_fail or unknown). Runs `eval.py test --emulate-blackwell` on every file (or the FILEs named), N at
once, spread over the GPUs round-robin (CUDA_VISIBLE_DEVICES), each cut at --limit seconds, on the task's tests
and its benchmark shapes (checked, not timed): most B200 evidence is the runner's benchmark mode, which checks
every benchmark shape ("failed testing"). `judged_on: benchmarks` limits a file to them (a B200 run of the
benchmarks alone, with no test run known). Prints one row per file: its verdict here (pass, fail, build_fail,
cannot judge, timed out: with the cases passed before the cut; a cut run with a failed case is a fail), the
B200's, whether they agree, the seconds to the worker's start (the build), of the cases after it and in all, and
the first line that explains a verdict other than pass. Then the agreement on files with a known outcome, the
count of opaque device faults (a fault that is neither named by the emulation nor said to be beyond it), which
must be zero, and of files whose cases took more than 120 s after the build. Writes DIR/agreement.tsv (a row as
each file finishes, so a run cut short keeps what it judged) and each run's JSON and output.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, ".public-blackwell")
TASKS = {"gemm": ".", "gemv": "tasks/nvfp4_gemv", "dual_gemm": "tasks/nvfp4_dual_gemm",
         "group_gemm": "tasks/nvfp4_group_gemm"}
OPAQUE = ("illegal instruction", "illegal memory access", "INVALID_HANDLE", "unspecified launch failure",
          "misaligned address", "Traceback")
BUILD_WORDS = ("does not build", "rejects the submission's PTX", "compil", "CompileError", "ptxas")
# A CuTe DSL kernel compiles in its first call: the DSL's compile errors are that file's build failure, as the
# B200 runner's "COMPILE ERROR" for the same file.
DSL_BUILD_ERRORS = ("OpError", "DSLAstPreprocessorError", "DSLCompilationError", "ICE")


@dataclass
class Row:
    file: str
    style: str
    expected: str
    verdict: str = ""
    passed: str = ""
    build_s: float = 0.0
    cases_s: float = 0.0
    total_s: float = 0.0
    why: str = ""

    @property
    def same(self) -> str:
        if self.expected == "unknown" or self.verdict in ("cannot judge", "timed out"):
            return "-"
        return "yes" if self.verdict == self.expected else "NO"


def verdict_of(report: dict | None, rc: int, output: str) -> tuple[str, str, str]:
    """(verdict, passed/total, the line that explains it)."""
    cases = (report or {}).get("cases") or []
    passed = sum(bool(c.get("passed")) for c in cases)
    failed = [c for c in cases if not c.get("passed") and not c.get("not_run")]
    if rc in (124, 137):   # how many of the cases that finished before the cut passed
        score = f"{passed}/{report.get('cases_total', len(cases))}" if cases else ""
        if failed:          # a case that finished wrong fails the file, whatever the cut cases would have done
            return "fail", score, " ".join(str(failed[0].get("error") or "wrong output").split())[:300]
        return "timed out", score, next((x for x in output.splitlines() if "error" in x.lower()), "")[:300]
    if not cases:
        lines = [x.strip() for x in output.splitlines() if x.strip()]
        return "fail", "", (lines[-1] if lines else f"no report (rc {rc})")[:300]
    not_judged = [c for c in cases if c.get("not_run")]
    score = f"{passed}/{len(cases)}"
    if failed:
        first = failed[0].get("error") or "wrong output"
        imported = (report or {}).get("import_error") or ""
        build = first.startswith("cannot import submission") and any(w in first for w in BUILD_WORDS) \
            or first.split(":")[0].strip() in DSL_BUILD_ERRORS
        return ("build_fail" if build else "fail"), score, " ".join(str(first or imported).split())[:300]
    if not_judged:
        return "cannot judge", score, " ".join(not_judged[0]["not_run"].split())[:300]
    warnings = sorted({w for c in cases for w in c.get("warnings", [])})
    return "pass", score, ("warning: " + warnings[0])[:300] if warnings else ""


def times_of(report: dict | None) -> tuple[float, float]:
    """(seconds to the worker's start, the build included; seconds of the cases after it) from a run's JSON, whose
    `system.wall_s` holds them (0 where the run left no report)."""
    wall = ((report or {}).get("system") or {}).get("wall_s") or {}
    return float(wall.get("worker_start") or 0.0), float(sum(wall.get("cases") or []))


def spec_name(problem: str, judged_on: str) -> str:
    return f"spec_{problem}_{'benchmarks' if judged_on == 'benchmarks' else 'tests_benchmarks'}.txt"


def spec_file(problem: str, judged_on: str, out: str) -> str:
    """A spec file of the task's tests and benchmarks (or one of them), in the competition's spec grammar."""
    import yaml
    sys.path.insert(0, ROOT)
    from arena.taskdef.specs import format_spec
    with open(os.path.join(ROOT, TASKS[problem], "task.yml")) as f:
        task = yaml.safe_load(f)
    sets = ("benchmarks",) if judged_on == "benchmarks" else ("tests", "benchmarks")
    path = os.path.join(out, spec_name(problem, judged_on))
    with open(path, "w") as f:
        f.write("".join(format_spec(case) + "\n" for name in sets for case in task.get(name) or []))
    return path


def run_one(entry: dict, gpu: str | None, limit: float, out: str) -> Row:
    row = Row(entry["file"], entry["style"], entry["expected"])
    label = entry["file"].replace("/", "__").removesuffix(".py")
    json_path, out_path = os.path.join(out, label + ".json"), os.path.join(out, label + ".out")
    env = dict(os.environ)
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    spec = os.path.join(out, spec_name(entry["problem"], entry.get("judged_on") or ""))
    command = ["timeout", str(int(limit)), sys.executable, "eval.py", "test", spec, "--emulate-blackwell", "-q",
               "--submission", os.path.join(CORPUS, entry["file"]), "--task", TASKS[entry["problem"]],
               "--json", json_path]
    started = time.perf_counter()
    with open(out_path, "w") as sink:
        rc = subprocess.call(command, cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT)
    row.total_s = time.perf_counter() - started
    try:
        with open(json_path) as f:
            report = json.load(f)
    except (OSError, ValueError):
        report = None
    with open(out_path, errors="replace") as f:
        output = f.read()
    row.verdict, row.passed, row.why = verdict_of(report, rc, output)
    row.build_s, row.cases_s = times_of(report)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="*")
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--gpus", default="", help="comma-separated GPU indices, round-robin (default: as set)")
    parser.add_argument("--limit", type=float, default=540.0, help="seconds per file")
    parser.add_argument("--out", default=os.path.join(ROOT, "out", "public_agreement"))
    args = parser.parse_args()
    manifest = os.path.join(CORPUS, "MANIFEST.tsv")
    if not os.path.isfile(manifest):
        print(f"no {manifest}: the corpus is fetched, never committed (see bench/README.md)", file=sys.stderr)
        return 2
    with open(manifest) as f:
        entries = [e for e in csv.DictReader(f, delimiter="\t")
                   if (not args.files or e["file"] in args.files) and os.path.isfile(os.path.join(CORPUS, e["file"]))]
    os.makedirs(args.out, exist_ok=True)
    for problem, judged_on in {(e["problem"], e.get("judged_on") or "") for e in entries}:
        spec_file(problem, judged_on, args.out)       # written once, before any run reads it
    gpus = [g for g in args.gpus.split(",") if g] or [None]
    # The slowest first (CuTe DSL and CUDA builds), so the pool's tail is short.
    entries.sort(key=lambda e: e["style"] not in ("cute_dsl", "cuda"))
    # Each row is written as its file finishes: a run cut short (the device call's own limit) keeps what it judged.
    tsv, one_writer = open(os.path.join(args.out, "agreement.tsv"), "w", buffering=1), threading.Lock()
    tsv.write("file\tstyle\texpected\tverdict\tsame\tcases\tbuild_s\tcases_s\ttotal_s\twhy\n")

    def judged(index_entry: tuple[int, dict]) -> Row:
        r = run_one(index_entry[1], gpus[index_entry[0] % len(gpus)], args.limit, args.out)
        with one_writer:     # the pool's threads finish at once: one row at a time
            tsv.write(f"{r.file}\t{r.style}\t{r.expected}\t{r.verdict}\t{r.same}\t{r.passed}\t{r.build_s:.0f}\t"
                      f"{r.cases_s:.0f}\t{r.total_s:.0f}\t{r.why}\n")
        print(f"done: {r.file} {r.verdict} ({r.total_s:.0f} s)", file=sys.stderr, flush=True)
        return r

    with ThreadPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(judged, enumerate(entries)))
    tsv.close()
    rows.sort(key=lambda r: r.file)
    print("| file | style | B200 | here | same? | cases | build s | cases s | total s | why |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r.file} | {r.style} | {r.expected} | {r.verdict} | {r.same} | {r.passed} | {r.build_s:.0f} | "
              f"{r.cases_s:.0f} | {r.total_s:.0f} | {r.why.replace('|', '/')[:220]} |")
    known = [r for r in rows if r.expected != "unknown"]
    agree = sum(r.same == "yes" for r in known)
    unjudged = [r for r in rows if r.verdict == "cannot judge"]
    opaque = [r for r in rows if r.verdict != "cannot judge" and any(w in r.why for w in OPAQUE)]
    print(f"\nagreement: {agree} of {len(known)} files with a known B200 outcome "
          f"({100 * agree / max(1, len(known)):.0f} %); cannot judge: {len(unjudged)}; timed out: "
          f"{sum(r.verdict == 'timed out' for r in rows)}; opaque faults: {len(opaque)}; "
          f"files: {len(rows)}; slowest: {max((r.total_s for r in rows), default=0):.0f} s; cases after the build "
          f"over 120 s: {sum(r.cases_s > 120 for r in rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
