"""Run the deliberately broken submissions (tests/broken/) and honest ones through eval.py on this machine's
GPU and print a table: submission, case, expected diagnosis, what the report said, ok?

    python bench/integrity/diagnose_gpu_check.py              # every row (a few minutes on an H100)
    python bench/integrity/diagnose_gpu_check.py --quick      # small shapes only
    python bench/integrity/diagnose_gpu_check.py --json out.json

Each row is one real `eval.py test SPEC --json` (or `eval.py diagnose`) subprocess, exactly what a user runs.
A row passes when the failing case's diagnosis (or, without one, its error) holds the expected phrase (one
of several separated by |), or, for honest submissions, when
every case passes (no diagnosis at all). Exit status 0 only when every row passes.
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
from tests.evalrun import run_eval, spec_file  # noqa: E402
BROKEN = os.path.join(ROOT, "tests", "broken")
PASS = "(passes, no diagnosis)"

SQUARE = "m: 256; n: 256; k: 512; l: 1; seed: 3"
ROWS = [
    # (submission, spec, expected phrase in the diagnosis, quick?)
    ("tests/broken/honest_blocked.py", SQUARE, PASS, True),
    ("tests/broken/nibble_swap_both.py", SQUARE, PASS, True),
    ("submissions/torch_reference.py", "m: 384; n: 128; k: 768; l: 2; seed: 9", PASS, True),
    ("tests/broken/nibble_swap_a.py", SQUARE, "swapped in ONE operand", True),
    ("tests/broken/scales_ignored.py", SQUARE, "block scales ignored", True),
    ("tests/broken/scales_exchanged.py", SQUARE, "SFA and SFB exchanged", True),
    ("tests/broken/layout_rows_plain.py", SQUARE, "32-row and 4-row-group roles swapped", True),
    ("tests/broken/layout_inner_transposed.py", SQUARE, "4-row-group and K-position indices swapped", True),
    ("tests/broken/layout_kgroup_swapped.py", SQUARE, "position inside the group swapped", True),
    ("tests/broken/layout_ktile_stride.py", SQUARE, "wrong stride between K tiles", True),
    ("tests/broken/layout_tile_order.py", SQUARE, "K-tile-major", True),
    ("tests/broken/layout_permuted_contiguous.py", SQUARE, ".contiguous()", True),
    ("tests/broken/layout_plain_as_blocked.py", SQUARE, "plain [MN, K/16] scales read as if", True),
    ("tests/broken/layout_blocked_as_plain.py", SQUARE, "read as if they were plain", True),
    ("tests/broken/layout_rows_plain_last_tile.py", "m: 384; n: 256; k: 512; l: 1; seed: 7",
     "but only for the last row tile (rows 256-383) of A", True),
    ("tests/broken/last_ktile_missing.py", SQUARE, "last K tile missing", True),
    ("tests/broken/only_last_ktile.py", "m: 128; n: 256; k: 1024; l: 1; seed: 4", "only the last K tile", True),
    ("tests/broken/transposed.py", SQUARE, "transposed", True),
    ("tests/broken/wrong_batch.py", "m: 128; n: 256; k: 256; l: 2; seed: 5", "holding the result of batch 0", True),
    ("tests/broken/layout_view_k_order.py", "m: 512; n: 1536; k: 7168; l: 1; seed: 1111",
     "K as (position in K tile (k%4), K tile (k/4))", False),
    ("tests/broken/fp16_accumulate.py", SQUARE, "fp16 accumulator", True),
    ("tests/broken/tail_unwritten.py", "m: 128; n: 384; k: 256; l: 1; seed: 6", "still hold the pre-filled c", True),
    ("tests/broken/zeros.py", SQUARE, "all zeros", True),
    # The integrity audit names an untouched c before the values are compared; either wording is right.
    ("tests/broken/untouched.py", SQUARE, "pre-filled c|returned the input c unchanged", True),
    ("tests/submissions/wrong_off_by_one.py", SQUARE, "no classic bug explains it", True),
    # Official shapes: the hypotheses run on a sample of rows/columns; these check they still name the bug.
    ("tests/broken/nibble_swap_a.py", "m: 512; n: 1536; k: 7168; l: 1; seed: 1111", "swapped in ONE operand", False),
    ("tests/broken/layout_tile_order.py", "m: 2304; n: 4608; k: 7168; l: 1; seed: 1111", "K-tile-major", False),
    ("tests/broken/layout_ktile_stride.py", "m: 128; n: 7168; k: 16384; l: 1; seed: 1111",
     "wrong stride between K tiles", False),
    ("tests/broken/last_ktile_missing.py", "m: 128; n: 7168; k: 16384; l: 1; seed: 1111", "last K tile missing", False),
    ("tests/broken/layout_view_k_order.py", "m: 512; n: 1536; k: 7168; l: 1; seed: 1111",
     "K as (position in K tile (k%4), K tile (k/4))", False),
    ("tests/broken/fp16_accumulate.py", "m: 128; n: 3072; k: 1536; l: 1; seed: 1111", "fp16 accumulator", False),
]
GROUP_TASK = "tasks/nvfp4_group_gemm"
GROUP_BENCH = ("m: [80, 176, 128, 72, 64, 248, 96, 160]; n: [4096, 4096, 4096, 4096, 4096, 4096, 4096, 4096]; "
               "k: [7168, 7168, 7168, 7168, 7168, 7168, 7168, 7168]; g: 8; seed: 1111")
GROUP_TAILS = "m: [200, 72, 128]; n: [256, 128, 384]; k: [256, 512, 256]; g: 3; seed: 7"
GROUP_SAME = "m: [128, 96, 64, 128]; n: [256, 256, 256, 256]; k: [256, 256, 256, 256]; g: 4; seed: 5"
ROWS += [   # group GEMM (run with --task tasks/nvfp4_group_gemm)
    ("tasks/nvfp4_group_gemm/torch_submission.py", GROUP_TAILS, PASS, True),
    ("tests/broken/group_honest_blocked.py", GROUP_SAME, PASS, True),
    ("tests/broken/group_exchanged.py", GROUP_SAME, "group 0 holds group 1's result", True),
    ("tests/broken/group_wrong_a.py", GROUP_SAME, "group 2 multiplies group 3's A", True),
    ("tests/broken/group_tail_unwritten.py", GROUP_TAILS, "group 0 (200x256x256): rows 128-199", True),
    ("tests/broken/group_layout_last.py", GROUP_SAME, "group 3 (128x256x256); groups 0, 1, 2 are right", True),
    ("tests/broken/group_exchanged.py", GROUP_BENCH, "group 7 holds group 0's result", False),
    ("tests/broken/group_layout_last.py", GROUP_BENCH, "group 7 (160x4096x7168); groups 0, 1, 2, 3, 4, 5, 6 are right", False),
]
DIAGNOSE_ROWS = [
    ("submissions/torch_reference.py", "6 of 6 probes passed"),
    ("tests/broken/race_fixup.py", "on identical inputs differ"),
    ("tests/broken/layout_rows_plain.py", "the mapping is exactly that of the 32-row and 4-row-group roles swapped"),
    ("tests/broken/nibble_swap_a.py", "exactly one operand takes the HIGH nibble"),
    ("tests/broken/gemv_row_stripe.py", "in every 32nd row (row % 32 == 0)"),      # runs with --task nvfp4_gemv
    ("tests/broken/group_rows_beyond_m.py", "group 0 (M = 96): rows 96-127 written past the end of c"),   # group task
    ("tasks/nvfp4_group_gemm/torch_submission.py", "no row past any group's M was written"),
]


def task_of(submission: str) -> list[str]:
    if "gemv" in submission:
        return ["--task", "tasks/nvfp4_gemv"]
    if os.path.basename(submission).startswith("group_") or GROUP_TASK in submission:
        return ["--task", GROUP_TASK]
    return []


def run_test_row(submission: str, spec: str, expected: str, timeout: float) -> tuple[bool, str, float]:
    run = run_eval("test", spec_file(spec + "\n"), "--submission", submission, *task_of(submission), json_report=True,
                   timeout=timeout)
    seconds = run.seconds
    if run.doc is None:
        tail = (run.stderr.strip().splitlines() or ["(no output)"])[-1]
        return False, f"eval.py exited {run.code} without JSON: {tail}", seconds
    cases = run.doc["cases"]
    failing = [c for c in cases if not c["passed"]]
    if expected == PASS:
        if failing:
            return False, f"FAILED: {failing[0]['error']} | {failing[0].get('diagnosis', '')}", seconds
        return True, PASS, seconds
    if not failing:
        return False, "passed (the bug did not show)", seconds
    got = failing[0].get("diagnosis") or f"(no diagnosis) {failing[0]['error']}"
    return any(phrase in got for phrase in expected.split("|")), got, seconds


def run_diagnose_row(submission: str, expected: str, timeout: float) -> tuple[bool, str, float]:
    run = run_eval("diagnose", "--submission", submission, *task_of(submission), timeout=timeout,
                   env={"COLUMNS": "400"})
    seconds = run.seconds
    text = " ".join(run.stdout.split())
    if expected in text:
        return True, expected, seconds
    lines = [line.strip() for line in run.stdout.splitlines() if line.strip().startswith(("✘", "✔"))]
    return False, " / ".join(lines)[:300] or f"exit {run.code}: {run.stderr.strip()[-200:]}", seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small shapes only")
    parser.add_argument("--json", help="write the rows to this file")
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()
    try:
        import torch
        device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "CPU (no CUDA GPU)"
    except Exception as error:          # noqa: BLE001
        device = f"unknown ({error})"
    print(f"device: {device}")
    rows = []
    print(f"{'':2} {'submission':<44} {'case':<44} {'s':>6}  expected -> got")
    todo = [("test", s, spec, e) for s, spec, e, quick in ROWS if quick or not args.quick] + \
           [("diagnose", s, "eval.py diagnose (default probes)", e) for s, e in DIAGNOSE_ROWS]
    for kind, submission, spec, expected in todo:
        try:
            if kind == "test":
                ok, got, seconds = run_test_row(submission, spec, expected, args.timeout)
            else:
                ok, got, seconds = run_diagnose_row(submission, expected, args.timeout)
        except subprocess.TimeoutExpired:
            ok, got, seconds = False, f"timed out after {args.timeout:g} s", args.timeout
        rows.append({"kind": kind, "submission": submission, "case": spec, "expected": expected, "got": got,
                     "ok": ok, "seconds": round(seconds, 1)})
        mark = "ok" if ok else "XX"
        print(f"{mark:2} {os.path.basename(submission):<44} {spec:<44} {seconds:6.1f}  {expected!r} -> {got[:160]}",
              flush=True)
    bad = [r for r in rows if not r["ok"]]
    print(f"{len(rows) - len(bad)} of {len(rows)} rows as expected")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device, "rows": rows}, f, indent=2)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
