"""Run the GPU side of the exploit suite on a real GPU and print a table: exploit, caught?, how.

    python bench/integrity/gpu_check.py [--json OUT.json] [--flagship]

Self-contained (no pytest), about 1-2 minutes on an H100: each check is one `eval.py` subprocess on a
small or official shape with few timed runs. Timing-sensitive checks (honest controls, side stream,
super-batch) run one at a time; the others run in parallel. Exit status 0 when every exploit was caught
and every honest control passed clean. tests/test_integrity_gpu.py asserts the same checks under pytest.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
from tests.evalrun import run_eval  # noqa: E402
SMALL = "m: 128; n: 256; k: 256; l: 1; seed: 1111"
BENCH_SMALL = "m: 128; n: 7168; k: 2048; l: 1; seed: 1111"          # official benchmark, SOL 1.333 us
BENCH_LARGE = "m: 128; n: 7168; k: 16384; l: 1; seed: 1111"         # official benchmark, SOL 8.994 us
FAST = ["--max-runs", "40", "--max-time", "3"]


@dataclass
class Check:
    name: str                     # what is tried
    submission: str               # path relative to the repo root
    mode: str
    spec: str
    error: str | tuple | None = None   # expected in the case's error (the case must fail; any of a tuple), or
    warning: tuple = ()           # any of these in the case's warnings (the case passes, flagged)
    clean: bool = False           # an honest control: passes, no warning at all
    serial: bool = False          # timing-sensitive: run alone
    env: dict = field(default_factory=dict)
    popcorn: bool = False         # through a real POPCORN_FD pipe (checks the raw lines too)
    timing: str = ""              # --timing for the run ("" = the default: the competition's method on a GPU)


def exploit(name: str) -> str:
    return f"tests/exploits/{name}.py"


CHECKS = [
    Check("honest control: pure PyTorch reference", "submissions/torch_reference.py", "leaderboard", BENCH_SMALL,
          clean=True, serial=True),
    Check("honest control: fresh output tensor", exploit("honest_fresh_output"), "leaderboard", SMALL,
          clean=True, serial=True),
    Check("side stream escapes the timer", exploit("gpu_side_stream"), "leaderboard", BENCH_LARGE,
          # refused by the parent's clock, or earlier: its outputs were unfinished when the window closed
          error=("timing cannot be trusted", "their digest differs"), serial=True),
    Check("code swap of Event.elapsed_time (reads a fifth)", exploit("code_swap_elapsed"), "leaderboard",
          BENCH_SMALL, error=("timing cannot be trusted",), serial=True),
    Check("window emptied (outputs computed before the timer)", exploit("window_emptied"), "leaderboard",
          BENCH_SMALL, error=("timing cannot be trusted",), serial=True),
    Check("channel takeover (every time forged to 1 us)", exploit("channel_hijack"), "leaderboard", BENCH_SMALL,
          error=("timing cannot be trusted",), serial=True),
    Check("super-batch (one call computes the batch)", exploit("super_batch"), "leaderboard", BENCH_SMALL,
          error=("timing cannot be trusted",), serial=True, timing="per-call"),
    # (Under the competition's method a sample holds the whole batch, so a super-batch gains nothing there;
    # per call is where it would bend the median and best.)
    Check("late write from a thread on a side stream", exploit("gpu_late_write_stream"), "leaderboard", SMALL,
          # Outputs are staged through shared memory when the reply is made: a write still in flight then
          # leaves c unchanged; one that lands later never reaches the evaluator's copy.
          error=("changed after custom_kernel returned", "returned the input c unchanged")),
    Check("output on the CPU", exploit("out_cpu_device"), "test", SMALL, error="a CPU tensor arrived where the device is cuda"),
    Check("untouched c", exploit("out_untouched_c"), "test", SMALL, error="returned the input c unchanged"),
    # right values in fp32: compared by value as the competition does, with a warning (--strict refuses it)
    Check("fp32 output", exploit("out_fp32"), "test", SMALL,
          warning=("output dtype is torch.float32, expected torch.float16: compared by value",)),
    Check("replay: same cached tensor per shape", exploit("replay_shape"), "leaderboard", SMALL,
          error=("are the same memory", "a timed output is wrong")),
    Check("replay keyed on _version", exploit("replay_version"), "leaderboard", SMALL,
          error="a timed output is wrong"),
    Check("input zeroing", exploit("input_zeroing"), "test", SMALL, error="wrong result"),
    Check("code in the reply's pickle (exec in the parent)", exploit("pickle_exec"), "test", SMALL,
          error="not a plain torch.Tensor"),
    Check("patching Event.elapsed_time", exploit("patch_harness_in_call"), "test", SMALL,
          error="replaced harness functions inside custom_kernel"),
    Check("a timer patch that removes itself", exploit("patch_timer_self_restoring"), "benchmark", SMALL,
          error="replaced harness functions inside custom_kernel"),
    Check("forging the result pipe via /proc", exploit("fd_forge"), "test", SMALL,
          error="returned the input c unchanged", popcorn=True),
    Check("reading the secret seed", exploit("seed_leak"), "test", SMALL, clean=True,
          env={"POPCORN_SEED": "987654321"}, popcorn=True),
]


def run_check(check: Check, workdir: str) -> dict:
    """Run one check; returns a row: name, caught (bool), how (one line), seconds, isolation."""
    tag = "".join(ch if ch.isalnum() else "_" for ch in check.name)[:40]
    spec = os.path.join(workdir, f"{tag}.txt")
    with open(spec, "w") as f:
        f.write(check.spec + "\n")
    exploit_dir = os.path.join(workdir, tag)
    os.makedirs(exploit_dir, exist_ok=True)
    os.chmod(exploit_dir, 0o1777)                  # the jail's own uid writes there
    env = {"EXPLOIT_DIR": exploit_dir, "ARENA_WORKER_WRITABLE": exploit_dir, **check.env}
    args = [check.mode, spec, "--submission", os.path.join(ROOT, check.submission), "--timeout", "120"]
    if check.mode != "test":
        args += FAST
    if check.timing:
        args += ["--timing", check.timing]
    run = run_eval(*args, popcorn=check.popcorn, env=env, json_report=True, timeout=300)
    seconds, raw, proc_code, stderr, doc = run.seconds, run.raw, run.code, run.stderr, run.doc
    if doc is None:
        return {"name": check.name, "caught": False, "seconds": seconds, "isolation": "?",
                "how": f"no JSON (exit {proc_code}): {stderr.strip().splitlines()[-1:]}"}
    case = doc["cases"][0] if doc["cases"] else {}
    warnings, error = case.get("warnings", []), case.get("error", "")
    isolation = (doc.get("integrity") or {}).get("worker", "?")
    row = {"name": check.name, "seconds": round(seconds, 1), "isolation": isolation, "exit": proc_code,
           "error": error, "warnings": warnings, "stats": case.get("stats")}
    if check.clean:
        leaks = [line for line in _log(exploit_dir, "seed_probe") if "987654321" in line]
        # The GPU's own state (clocks that moved, a power cap) is the machine's, not a flag on the submission:
        # four checks at once on one host share its power
        flags = [w for w in warnings if not w.startswith(GPU_STATE_NOTES)]
        row["caught"] = proc_code == 0 and not flags and not leaks and "FORGED" not in raw
        row["how"] = "passed, no flags" if row["caught"] else f"exit {proc_code}; {error or warnings or leaks}"
        if check.name.startswith("reading"):
            denied = [line for line in _log(exploit_dir, "seed_probe") if "environ: denied" in line]
            row["how"] = f"seed not found; parent environ {'denied' if denied else 'readable (seed absent)'}"
    elif check.error:
        expected = (check.error,) if isinstance(check.error, str) else check.error
        row["caught"] = proc_code == 112 and any(e in error for e in expected) and "FORGED" not in raw
        row["how"] = error or f"exit {proc_code}, no error"
    else:
        hits = [w for w in warnings if any(expected in w for expected in check.warning)]
        row["caught"] = bool(hits)
        row["how"] = f"flag: {hits[0]}" if hits else f"NOT flagged (exit {proc_code}; {error or warnings})"
        if warnings and len(warnings) > 1:
            row["how"] += f" (+{len(warnings) - 1} more flags)"
    if case.get("stats"):
        row["how"] += f" [median {case['stats']['median'] / 1e3:.2f} us]"
    return row


GPU_STATE_NOTES = ("the SM clock moved", "the GPU was slowed")


def _log(folder: str, name: str) -> list[str]:
    path = os.path.join(folder, name)
    return open(path).read().splitlines() if os.path.exists(path) else []


def run_all(checks=CHECKS, parallel: int = 4) -> list[dict]:
    with tempfile.TemporaryDirectory() as workdir:
        rows = {}
        for check in [c for c in checks if c.serial]:
            rows[check.name] = run_check(check, workdir)
        with ThreadPoolExecutor(parallel) as pool:
            others = [c for c in checks if not c.serial]
            for check, row in zip(others, pool.map(lambda c: run_check(c, workdir), others)):
                rows[check.name] = row
        return [rows[c.name] for c in checks]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--flagship", action="store_true",
                        help="also benchmark submission.py on the official benchmark shapes (honest control; "
                             "includes its JIT build)")
    args = parser.parse_args()
    checks = list(CHECKS)
    if args.flagship:
        checks.insert(0, Check("honest control: flagship submission.py", "submission.py", "leaderboard",
                               BENCH_SMALL, clean=True, serial=True))
    started = time.time()
    rows = run_all(checks)
    width = max(len(r["name"]) for r in rows)
    print(f"{'exploit':<{width}}  caught?  how")
    for r in rows:
        print(f"{r['name']:<{width}}  {'yes' if r['caught'] else 'NO ':<7}  {r['how']}  ({r['seconds']} s)")
    isolation = sorted({r["isolation"] for r in rows})
    print(f"worker isolation: {'; '.join(isolation)}")
    print(f"{sum(r['caught'] for r in rows)} of {len(rows)} as expected in {time.time() - started:.0f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2, default=str)
    sys.exit(0 if all(r["caught"] for r in rows) else 1)


if __name__ == "__main__":
    main()
