"""bench/emulation/public_agreement.py reads each run's times from the evaluator's real JSON report: the build
(seconds to the worker's start) and the cases after it, the measure of "a file's tests within 120 s"."""
import json
import os
import subprocess
import sys

from tests.evalrun import GOOD, ROOT, SMALL, run_eval, spec_file
from tests.fileload import load_file


def _agreement():
    return load_file(os.path.join(ROOT, "bench", "emulation", "public_agreement.py"), "public_agreement")


def test_the_build_and_case_seconds_come_from_a_real_report():
    run = run_eval("test", spec_file(SMALL), "--submission", GOOD, json_report=True, timeout=300)
    assert run.code == 0 and run.doc, run.stderr[-2000:]
    build_s, cases_s = _agreement().times_of(run.doc)
    wall = run.doc["system"]["wall_s"]
    assert build_s == wall["worker_start"] > 0
    assert len(wall["cases"]) == 2 and cases_s == sum(wall["cases"]) > 0
    assert build_s + cases_s <= wall["total"] + 1e-6


def test_a_run_that_left_no_report_has_no_times():
    assert _agreement().times_of(None) == (0.0, 0.0)
    assert _agreement().times_of({"cases": []}) == (0.0, 0.0)


def _cut_run(tmp_path, submission: str):
    """The evaluator on SMALL (two cases), cut by `timeout` before its own per-call limit: its report and verdict."""
    report = tmp_path / "report.json"
    command = ["timeout", "25", sys.executable, "eval.py", "test", spec_file(SMALL), "-q", "--timeout", "300",
               "--submission", os.path.join(ROOT, "tests", "submissions", submission), "--json", str(report)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 124, done.stdout[-2000:] + done.stderr[-2000:]
    return _agreement().verdict_of(json.loads(report.read_text()), done.returncode, done.stdout + done.stderr)


def test_a_run_cut_by_the_limit_keeps_the_cases_it_finished(tmp_path):
    """public_agreement cuts each file with `timeout` (here before the evaluator's own per-call limit); the
    evaluator, ended by SIGTERM, still writes the cases that finished, and the row says how many passed."""
    verdict, cases, _ = _cut_run(tmp_path, "passes_then_hangs.py")
    assert (verdict, cases) == ("timed out", "1/2")


def test_a_run_cut_after_a_failed_case_is_a_fail(tmp_path):
    """A case that finished wrong before the cut decides the file: any failed test fails a submission, on a B200
    as here, whatever the cases the limit stopped would have done."""
    verdict, cases, why = _cut_run(tmp_path, "wrong_then_hangs.py")
    assert (verdict, cases) == ("fail", "0/2") and "mismatch" in why.lower(), (verdict, cases, why)
