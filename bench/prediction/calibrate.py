"""The B200 time model (arena/predict/b200.py) against public per-shape B200 times.

    python3 bench/prediction/calibrate.py run [--jobs N] [--gpus 0,1] [--per-gpu 3] [--limit S] [--out DIR]
                                              [--kinds K,...] [--only ID ...] [--skip ID ...]
    python3 bench/prediction/calibrate.py fit DIR [DIR ...]      (no GPU needed)

`calibration.tsv` (beside this file) names public submissions, each at a commit, with the B200 mean its own
repository logged per benchmark shape; the files themselves stay outside git, under
.public-blackwell/calibration/files/<id>.py (docs/b200_prediction.md says how to fetch them).

`run` (on a Hopper GPU): `eval.py predict` on every file, N at once over the GPUs and at most --per-gpu (3) on
one GPU (the jIab-b/mlsys files allocate 40 GB at import), each cut at --limit seconds;
each run's JSON report (per case, the work counts of its emulated call) and its output's tail go to
DIR/runs.jsonl, a line per file as it ends.

`fit`: splits the files in two halves by a hash of their id (a file's shapes stay together), fits the model's
four free constants (per-call cost, CTA fill, per-SM TMA rate, serial round trip) on the first half's counted
calls, and the three of the calls timed here (they ran natively: LATENCY_BOUND_SHARE, LATENCY_BOUND_RATIO,
BEYOND_DRAM_RATIO) on those, each by a grid search over the median
of |log(predicted / logged)|, and prints every file and shape with its prediction from
those constants, then per half the median relative error and the Spearman rank correlation of the files'
geometric means (per problem, and over all; tied values share their mean rank). With --constants as they stand in b200.py it checks them instead of fitting.
"""
from __future__ import annotations

import argparse
import csv
import hashlib
import itertools
import json
import math
import os
import queue
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
from arena.predict import b200  # noqa: E402
from arena.taskdef.specs import parse_spec_line  # noqa: E402

TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "calibration.tsv")
FILES = os.path.join(ROOT, ".public-blackwell", "calibration", "files")
TASKS = {"gemm": ".", "gemv": "tasks/nvfp4_gemv", "dual_gemm": "tasks/nvfp4_dual_gemm",
         "group_gemm": "tasks/nvfp4_group_gemm"}
TASK_NAMES = {"gemm": "nvfp4_gemm", "gemv": "nvfp4_gemv", "dual_gemm": "nvfp4_dual_gemm",
              "group_gemm": "nvfp4_group_gemm"}


def read_table() -> list[dict]:
    with open(TABLE, newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def shape_args(shape: str) -> dict:
    """`m=128;n=7168;k=16384;l=1;seed=1111` (a group's m=[..]) -> the case's arguments."""
    args = {}
    for part in shape.split(";"):
        key, value = part.split("=", 1)
        args[key.strip()] = json.loads(value)
    return args


def same_case(a: dict, b: dict) -> bool:
    """The same shape (the seed aside; a spec line's lists are tuples)."""
    def plain(v):
        return list(v) if isinstance(v, tuple) else v
    return all(plain(a.get(k)) == plain(b.get(k)) for k in set(a) | set(b) if k != "seed")


def gpu_slots(gpus: list[str], per_gpu: int) -> queue.Queue:
    """`per_gpu` slots of each GPU: a run takes one for its whole length, so no GPU ever holds more than that
    many runs (a GPU picked by the run's index would, once runs end out of order)."""
    slots = queue.Queue()
    for _ in range(per_gpu):
        for gpu in gpus:
            slots.put(gpu)
    return slots


def run(args) -> int:
    rows = read_table()
    kinds = set(args.kinds.split(",")) if args.kinds else None
    files = {}
    for row in rows:
        if (kinds is None or row["kind"] in kinds) and (not args.only or any(x in row["id"] for x in args.only)) \
                and not any(x in row["id"] for x in args.skip):
            files.setdefault(row["id"], row["problem"])
    os.makedirs(args.out, exist_ok=True)
    gpus = args.gpus.split(",")
    slots = gpu_slots(gpus, args.per_gpu)
    order = sorted(files)

    scratch = tempfile.mkdtemp(prefix="calibration-")

    def one(name):
        path = os.path.join(FILES, name + ".py")
        if not os.path.isfile(path):
            return name, "missing", 0.0, None, ""
        gpu = slots.get()
        try:
            return predict_one(name, path, gpu)
        finally:
            slots.put(gpu)

    def predict_one(name, path, gpu):
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=gpu)
        start, report, output = time.monotonic(), None, ""
        json_path = os.path.join(scratch, name + ".json")
        try:
            done = subprocess.run([sys.executable, "eval.py", "predict", "-q", "--timeout", str(args.limit),
                                   "--submission", path, "--task", TASKS[files[name]], "--json", json_path],
                                  cwd=ROOT, env=env, capture_output=True, text=True, timeout=args.limit)
            status, output = f"rc {done.returncode}", done.stdout + done.stderr
        except subprocess.TimeoutExpired as stopped:
            status = "timed out"
            output = "".join(x.decode(errors="replace") if isinstance(x, bytes) else x or ""
                             for x in (stopped.stdout, stopped.stderr))
        try:
            with open(json_path) as f:
                report = json.load(f)
        except (OSError, ValueError):
            pass
        return name, status, time.monotonic() - start, report, output[-3000:]

    with ThreadPoolExecutor(min(args.jobs, len(gpus) * args.per_gpu)) as pool, \
            open(os.path.join(args.out, "runs.jsonl"), "a") as runs:
        for name, status, seconds, report, output in pool.map(one, order):
            # one line per file as it ends: a run cut off by its limit keeps every file finished before
            runs.write(json.dumps({"id": name, "status": status, "seconds": round(seconds, 1), "report": report,
                                   "output": output}) + "\n")
            runs.flush()
            print(f"{name}\t{status}\t{seconds:.0f} s", flush=True)
    return 0


def half_of(file_id: str) -> int:
    return hashlib.sha256(file_id.encode()).digest()[0] % 2


def observations(dirs: list[str]) -> list[dict]:
    """Every table row whose file's predict run passed that case, with its counts."""
    reports = {}
    for d in dirs:
        with open(os.path.join(d, "runs.jsonl")) as f:
            for line in f:
                run = json.loads(line)
                if run.get("report"):
                    reports[run["id"]] = run["report"]
    found = []
    for row in read_table():
        report = reports.get(row["id"])
        if not report:
            continue
        args = shape_args(row["shape"])
        case = next((c for c in report.get("cases", []) if c.get("passed") and c.get("prediction", {}).get("counts")
                     is not None and same_case(parse_spec_line(c["spec"]), args)), None)
        if case is None:
            continue
        counts = b200.WorkCounts.from_reply(case["prediction"]["counts"])
        given = case["prediction"]
        native = b200.NativeTiming(given["hopper_us"], given["here_dram_gbps"]) if given.get("hopper_us") else None
        found.append({**row, "args": args, "counts": counts, "native": native, "logged": float(row["b200_us"]),
                      "half": half_of(row["id"])})
    return found


def prediction(obs: dict) -> b200.Prediction:
    return b200.predict(TASK_NAMES[obs["problem"]], obs["args"], obs["counts"], obs["native"])


def predicted(obs: dict) -> float | None:
    return prediction(obs).b200_us


def set_constants(call_us: float, fill_us: float, tma_rate: float, trip_us: float) -> None:
    b200.CALL_US, b200.CTA_FILL_US, b200.TMA_BYTES_PER_SM_PER_US, b200.ROUND_TRIP_US = \
        call_us, fill_us, tma_rate, trip_us


def log_errors(obs: list[dict]) -> list[float]:
    out = []
    for o in obs:
        p = predicted(o)
        if p:
            out.append(math.log(p / o["logged"]))
    return out


def median_abs_log_error(obs: list[dict]) -> float:
    errors = log_errors(obs)
    return statistics.median(abs(e) for e in errors) if errors else math.inf


def fit_native(obs: list[dict]) -> tuple[float, float, float]:
    """(LATENCY_BOUND_SHARE, LATENCY_BOUND_RATIO, BEYOND_DRAM_RATIO) for the calls that ran natively: the grid's
    best median |log(predicted / logged)|; the three stay set as fitted."""
    best, best_score = (b200.LATENCY_BOUND_SHARE, b200.LATENCY_BOUND_RATIO, b200.BEYOND_DRAM_RATIO), math.inf
    for values in itertools.product([0.0, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08, 0.1, 0.12, 0.15],
                                    [x / 20 for x in range(8, 21)], [x / 20 for x in range(6, 31)]):
        b200.LATENCY_BOUND_SHARE, b200.LATENCY_BOUND_RATIO, b200.BEYOND_DRAM_RATIO = values
        score = median_abs_log_error(obs)
        if score < best_score:
            best, best_score = values, score
    b200.LATENCY_BOUND_SHARE, b200.LATENCY_BOUND_RATIO, b200.BEYOND_DRAM_RATIO = best
    return best


def percentiles(obs: list[dict]) -> str:
    ratios = sorted(o["logged"] / predicted(o) for o in obs if predicted(o))
    return f"({ratios[len(ratios) // 10]:.2f}, {ratios[(9 * len(ratios)) // 10]:.2f})" if ratios else "(none)"


def fit(obs: list[dict]) -> tuple[float, float, float, float]:
    best, best_score = None, math.inf
    for call_us, fill_us, tma_rate, trip_us in itertools.product(
            [1.0, 2.0, 3.0, 4.0, 6.0, 8.0], [0.0, 1.0, 2.0, 4.0, 6.0],
            [25e3, 50e3, 100e3, 150e3, 200e3, 300e3], [0.2, 0.35, 0.5, 0.7, 1.0, 1.4]):
        set_constants(call_us, fill_us, tma_rate, trip_us)
        score = median_abs_log_error(obs)
        if score < best_score:
            best, best_score = (call_us, fill_us, tma_rate, trip_us), score
    return best


def spearman(xs: list[float], ys: list[float]) -> float | None:
    if len(xs) < 3:
        return None

    def ranks(v):   # tied values share the mean of their ranks (as scipy.stats.spearmanr): files with the same
        order = sorted(range(len(v)), key=lambda i: v[i])      # counts get the same prediction, not an order
        r = [0.0] * len(v)
        start = 0
        while start < len(order):
            end = start
            while end + 1 < len(order) and v[order[end + 1]] == v[order[start]]:
                end += 1
            for i in order[start:end + 1]:
                r[i] = (start + end) / 2
            start = end + 1
        return r
    rx, ry = ranks(xs), ranks(ys)
    mx, my = statistics.mean(rx), statistics.mean(ry)
    num = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    den = math.sqrt(sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry))
    return num / den if den else None


def median_error(scored: list[tuple[dict, float]]) -> str:
    """The median of |predicted / logged - 1| over (observation, prediction) pairs, as a percentage."""
    return f"{100 * statistics.median(abs(p / o['logged'] - 1) for o, p in scored):.1f} %"


def summary(obs: list[dict], label: str) -> None:
    scored = [(o, predicted(o)) for o in obs]
    scored = [(o, p) for o, p in scored if p]
    print(f"\n{label}: {len(obs)} shapes of {len({o['id'] for o in obs})} files; predicted {len(scored)}")
    if scored:
        print(f"  median relative error {median_error(scored)}")
    for basis, chosen in (("from the counts", [(o, p) for o, p in scored if o["native"] is None]),
                          ("from the time here", [(o, p) for o, p in scored if o["native"] is not None])):
        if chosen:
            print(f"    {basis}: {len(chosen)} shapes, median relative error {median_error(chosen)}")
    for kind in sorted({o["kind"] for o in obs}):
        chosen = [(o, p) for o, p in scored if o["kind"] == kind]
        listed = [o for o in obs if o["kind"] == kind]
        error = median_error(chosen) if chosen else "-"
        print(f"    {kind}: {len(chosen)} of {len(listed)} shapes predicted ({len({o['id'] for o, _ in chosen})} "
              f"files), median relative error {error}")
    for problem in sorted({o["problem"] for o in obs}) + ["all"]:
        per_file = {}
        for o, p in scored:
            if problem in ("all", o["problem"]):
                per_file.setdefault((o["problem"], o["id"]), []).append((p, o["logged"]))
        # a file's geometric mean over the shapes it has; files compare within a problem (same shapes)
        pairs = [(statistics.geometric_mean(p for p, _ in v), statistics.geometric_mean(g for _, g in v))
                 for v in per_file.values()]
        rho = spearman([p for p, _ in pairs], [g for _, g in pairs])
        print(f"  {problem}: {len(pairs)} files, Spearman of geometric means "
              f"{'n/a (fewer than 3)' if rho is None else f'{rho:.2f}'}")


def fit_command(args) -> int:
    obs = observations(args.dirs)
    if not obs:
        print("no observations: no JSON of a passing predict run matches calibration.tsv", file=sys.stderr)
        return 1
    if not args.constants:
        # the two bases fit apart: a call timed here never reads the count model's constants, nor the reverse
        counted = [o for o in obs if o["half"] == 0 and o["native"] is None]
        timed = [o for o in obs if o["half"] == 0 and o["native"] is not None]
        if counted:
            constants = fit(counted)
            set_constants(*constants)
            print(f"fitted on half 0: CALL_US = {constants[0]}, CTA_FILL_US = {constants[1]}, "
                  f"TMA_BYTES_PER_SM_PER_US = {constants[2]:.0f}, ROUND_TRIP_US = {constants[3]}")
            print(f"RANGE = {percentiles(counted)}  (10th and 90th percentiles of logged / predicted, half 0)")
        if timed:
            share, latency, beyond = fit_native(timed)
            print(f"fitted on half 0: LATENCY_BOUND_SHARE = {share}, LATENCY_BOUND_RATIO = {latency}, "
                  f"BEYOND_DRAM_RATIO = {beyond}")
            print(f"NATIVE_RANGE = {percentiles(timed)}  (the same, calls timed here)")
    print("\nhalf\tproblem\tkind\tid\tshape\tlogged_us\tpredicted_us\tbound\tratio")
    for o in sorted(obs, key=lambda o: (o["half"], o["problem"], o["id"], o["shape"])):
        p = prediction(o)
        ratio = f"{p.b200_us / o['logged']:.2f}" if p.b200_us else "-"
        print(f"{o['half']}\t{o['problem']}\t{o['kind']}\t{o['id'][:60]}\t{o['shape'][:40]}\t{o['logged']:.2f}\t"
              f"{p.b200_us if p.b200_us else '-'}\t{p.bound}\t{ratio}")
    summary([o for o in obs if o["half"] == 0], "half 0 (fitting)")
    summary([o for o in obs if o["half"] == 1], "half 1 (held out)")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--jobs", type=int, default=8)
    r.add_argument("--gpus", default="0")
    r.add_argument("--per-gpu", type=int, default=3, help="runs at once on one GPU at most (the jIab-b/mlsys files "
                   "allocate 40 GB at import)")
    r.add_argument("--limit", type=int, default=400)
    r.add_argument("--out", default="out/prediction")
    r.add_argument("--kinds", default="", help="only files of these kinds (calibration.tsv's `kind`)")
    r.add_argument("--only", nargs="*", default=[], help="only files whose id holds one of these")
    r.add_argument("--skip", nargs="*", default=[], help="not the files whose id holds one of these")
    f = sub.add_parser("fit")
    f.add_argument("dirs", nargs="+")
    f.add_argument("--constants", action="store_true", help="check b200.py's constants instead of fitting")
    args = parser.parse_args()
    return run(args) if args.command == "run" else fit_command(args)


if __name__ == "__main__":
    sys.exit(main())
