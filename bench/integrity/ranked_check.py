"""What ranks a submission, against forgeries and honest noise, on one GPU: prints two tables.

    python bench/integrity/ranked_check.py exploits [--spec SPEC]      # each forgery beside its honest control
    python bench/integrity/ranked_check.py honest --runs N             # N leaderboard runs, alternating kernels

`exploits`: every timing forgery in tests/exploits/ (code swap, window emptied, channel takeover, invented
samples, guard blinded) runs `leaderboard` (it must fail with exit 112 and say why) and `benchmark` (what it
would have shown, and whether it was marked untrusted), beside the honest PyTorch submission they all wrap.
`honest`: the shipped kernel and the PyTorch reference alternate through `leaderboard` over task.yml's
benchmarks; a run that fails is a false alarm. Both print, per case, the worker's reported mean beside the
parent's own clock per call (arena/clock/parent_clock.py): their ratio is the margin a forgery would have.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
from tests.evalrun import run_eval  # noqa: E402

BENCH_LARGE = "m: 128; n: 7168; k: 16384; l: 1; seed: 1111"         # official benchmark, SOL 8.994 us
FORGERIES = ("code_swap_elapsed", "window_emptied", "channel_hijack", "reply_negative_sample", "guard_blinded")
HONEST = "submissions/torch_reference.py"


def _run(mode: str, spec: str, submission: str, workdir: str, *extra: str):
    path = os.path.join(workdir, "spec.txt")
    with open(path, "w") as f:
        f.write(spec)
    folder = tempfile.mkdtemp(dir=workdir)
    os.chmod(folder, 0o1777)
    env = {"EXPLOIT_DIR": folder, "ARENA_WORKER_WRITABLE": folder}
    return run_eval(mode, path, "--submission", os.path.join(ROOT, submission), *extra, env=env,
                    json_report=True, timeout=600)


def _cases(run) -> list[dict]:
    return (run.doc or {}).get("cases", [])


def _per_call(case: dict) -> tuple[float | None, float | None]:
    stats = case.get("stats") or {}
    return (stats.get("mean"), (case.get("timing") or {}).get("parent_clock_ns_per_call"))


def exploits(spec: str, max_time: str) -> int:
    rows, bad = [], 0
    with tempfile.TemporaryDirectory() as workdir:
        honest = _run("benchmark", spec + "\n", HONEST, workdir, "--max-time", max_time)
        honest_mean = (_per_call(_cases(honest)[0])[0] if _cases(honest) else None) or float("nan")
        rows.append(("honest control (PyTorch)", f"exit {honest.code}", honest_mean, honest_mean, "", ""))
        for name in FORGERIES:
            submission = f"tests/exploits/{name}.py"
            ranked = _run("leaderboard", spec + "\n", submission, workdir, "--max-time", max_time)
            shown = _run("benchmark", spec + "\n", submission, workdir, "--max-time", max_time)
            error = (_cases(ranked)[0].get("error", "") if _cases(ranked) else ranked.stderr[-200:])
            case = _cases(shown)[0] if _cases(shown) else {}
            mean, clock = _per_call(case)
            verdict = "refused" if ranked.code == 112 else f"RANKED (exit {ranked.code})"
            within = mean is not None and abs(mean - honest_mean) <= 0.10 * honest_mean
            caught = ranked.code == 112 or within
            bad += not caught
            rows.append((name, verdict, mean, clock, "untrusted" if case.get("untrusted") else "-",
                         error[:110]))
    print(f"{'forgery':28} {'leaderboard':18} {'benchmark us':>13} {'parent us':>10} {'flag':10} reason")
    for name, verdict, mean, clock, flag, why in rows:
        shown = f"{mean / 1e3:13.1f}" if mean == mean and mean is not None else f"{'-':>13}"
        print(f"{name:28} {verdict:18} {shown} {(clock or 0) / 1e3:10.1f} {flag:10} {why}")
    print(f"forgeries neither refused nor within 10 % of honest: {bad}")
    return 1 if bad else 0


def honest(runs: int, out: str | None, first: int = 0) -> int:
    kernels = ("submission.py", HONEST)
    false_alarms, ratios = 0, []
    for i in range(runs):
        submission = kernels[(i + first) % 2]
        run = run_eval("leaderboard", "--submission", os.path.join(ROOT, submission), json_report=True,
                       timeout=600)
        failed = run.code != 0
        false_alarms += failed
        for case in _cases(run):
            mean, clock = _per_call(case)
            if mean and clock:
                ratios.append(mean / clock)
            bound = (case.get("timing") or {}).get("parent_clock_bound")
            print(f"run {i:2} {submission:32} case {case.get('index')}: exit {run.code} "
                  f"mean {mean / 1e3 if mean else float('nan'):9.2f} us  parent {(clock or 0) / 1e3:9.2f} us"
                  f"  bound {bound}  {case.get('error', '')[:100]}", flush=True)
        if out:     # after every run, so a run cut short by a time limit keeps what finished
            with open(out, "w") as f:
                json.dump({"ratios": ratios, "false_alarms": false_alarms, "runs": i + 1}, f)
    if ratios:
        ratios.sort()
        print(f"reported / parent clock per call over {len(ratios)} cases: min {ratios[0]:.3f}, "
              f"median {ratios[len(ratios) // 2]:.3f}, max {ratios[-1]:.3f} (refused below "
              f"{1 - 0.10:.2f} less the per-window slack)")
    print(f"false alarms: {false_alarms} of {runs} honest leaderboard runs")
    return 1 if false_alarms else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("exploits", "honest"))
    parser.add_argument("--spec", default=BENCH_LARGE)
    parser.add_argument("--max-time", default="3")
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--first", type=int, default=0, help="1: start with the PyTorch reference")
    parser.add_argument("--json")
    args = parser.parse_args()
    sys.exit(exploits(args.spec, args.max_time) if args.what == "exploits" else honest(args.runs, args.json, args.first))


if __name__ == "__main__":
    main()
