"""eval.py end to end, as real subprocesses: the official protocol, standalone reports, failures of every kind."""
import json
import os

import pytest

from tests.evalrun import GOOD, ROOT, SMALL, run_eval, spec_file, submission


@pytest.fixture(scope="module")
def small_spec():
    return spec_file(SMALL)


def test_popcorn_test_mode_passes_with_official_keys(small_spec):
    run = run_eval("test", small_spec, "--submission", GOOD, popcorn=True)
    assert run.code == 0, run.stderr
    assert run.raw.splitlines() == [
        "test-count: 2",
        "test.0.spec: m: 128; n: 256; k: 256; l: 1; seed: 1111", "test.0.status: pass",
        "test.1.spec: m: 128; n: 512; k: 512; l: 1; seed: 7", "test.1.status: pass",
        "check: pass"]


def test_popcorn_wrong_result_fails_with_112_and_names_the_mismatch(small_spec):
    run = run_eval("test", small_spec, "--submission", submission("wrong_off_by_one.py"), popcorn=True)
    assert run.code == 112
    assert run.keys["check"] == "fail" and run.keys["test.0.status"] == "fail"
    assert "Number of mismatched elements: 1" in run.keys["test.0.error"]


@pytest.mark.parametrize("name,expected", [
    ("raises.py", "RuntimeError: kernel launch failed: too many resources requested"),
    ("crashes.py", "the submission's process died while running custom_kernel (run) (killed by SIGABRT)"),
    ("no_kernel.py", "defines no function custom_kernel(data)"),
    ("syntax_error.py", "cannot import submission: SyntaxError"),
])
def test_each_failure_is_one_clear_line_and_every_case_reports(small_spec, name, expected):
    run = run_eval("test", small_spec, "--submission", submission(name), popcorn=True)
    assert run.code == 112
    assert run.keys["test-count"] == "2" and run.keys["check"] == "fail"
    for i in range(2):
        assert run.keys[f"test.{i}.status"] == "fail"
        assert expected in run.keys[f"test.{i}.error"]
        assert "\n" not in run.keys[f"test.{i}.error"]


def test_with_keep_going_a_hang_is_killed_at_the_timeout_and_the_next_case_still_runs(small_spec):
    run = run_eval("test", small_spec, "--submission", submission("hangs.py"), "--timeout", "4", "--keep-going",
                   popcorn=True)
    assert run.code == 112
    assert "timed out after 4 s" in run.keys["test.0.error"]
    assert "timed out after 4 s" in run.keys["test.1.error"]


def test_a_crash_fails_one_case_and_a_new_worker_runs_the_rest():
    spec = spec_file("m: 128; n: 256; k: 256; l: 1; seed: 1\nm: 128; n: 512; k: 256; l: 1; seed: 2\n"
                     "m: 128; n: 384; k: 256; l: 1; seed: 3\n")
    run = run_eval("test", spec, "--submission", submission("crash_on_n512.py"), popcorn=True)
    assert run.code == 112
    assert [run.keys[f"test.{i}.status"] for i in range(3)] == ["pass", "fail", "pass"]
    assert "SIGABRT" in run.keys["test.1.error"]


@pytest.mark.parametrize("text,fragment", [
    ("m: 128; n 256", "cannot parse 'n 256'"),
    ("m: 128; n: [1, x]", "list value '[1, x]' must hold integers"),
    ("\n\n", "holds no cases"),
])
def test_malformed_spec_exits_113_with_one_line(text, fragment):
    run = run_eval("test", spec_file(text), "--submission", GOOD, popcorn=True)
    assert run.code == 113
    assert fragment in run.stderr and len(run.stderr.strip().splitlines()) == 1
    assert run.raw == ""


def test_unreadable_spec_file_exits_113():
    run = run_eval("test", "/nonexistent/spec.txt", "--submission", GOOD, popcorn=True)
    assert run.code == 113 and "cannot read spec file" in run.stderr


def test_unknown_mode_is_a_usage_error():
    assert run_eval("script", "--submission", GOOD).code == 2


def test_blank_lines_and_grouped_grammar_are_accepted():
    spec = spec_file("\nm: 128; n: 256; k: 256; l: 1; seed: 1111\n\n  m : 128 ; n: 256; k: 256; l: 1; seed: 3 \n")
    run = run_eval("test", spec, "--submission", GOOD, popcorn=True)
    assert run.code == 0 and run.keys["test-count"] == "2"


def test_popcorn_seed_changes_the_inputs_but_not_the_spec(small_spec, tmp_path):
    """With POPCORN_SEED the data differ (a submission keyed on the public seed would fail) yet specs echo as written."""
    run = run_eval("test", small_spec, "--submission", GOOD, popcorn=True, env={"POPCORN_SEED": "987654321"})
    assert run.code == 0 and run.keys["test.0.spec"] == "m: 128; n: 256; k: 256; l: 1; seed: 1111"
    bad = run_eval("test", small_spec, "--submission", GOOD, popcorn=True, env={"POPCORN_SEED": "x"})
    assert bad.code == 113 and "POPCORN_SEED must be an integer" in bad.stderr


def test_popcorn_benchmark_keys_and_units(small_spec):
    run = run_eval("benchmark", small_spec, "--submission", GOOD, "--max-runs", "4", popcorn=True)
    assert run.code == 0, run.stderr
    assert run.keys["benchmark-count"] == "2" and run.keys["check"] == "pass"
    for i in range(2):
        assert int(run.keys[f"benchmark.{i}.runs"]) == 4
        mean, best, worst = (float(run.keys[f"benchmark.{i}.{k}"]) for k in ("mean", "best", "worst"))
        assert 1e3 < best <= mean <= worst          # nanoseconds: a CPU GEMM takes well over a microsecond
        assert float(run.keys[f"benchmark.{i}.err"]) >= 0 and float(run.keys[f"benchmark.{i}.std"]) >= 0


def test_leaderboard_stops_at_the_first_failing_case_and_exits_112(small_spec):
    run = run_eval("leaderboard", small_spec, "--submission", submission("wrong_off_by_one.py"),
                   "--max-runs", "3", popcorn=True)
    assert run.code == 112
    assert run.keys["benchmark.0.status"] == "fail" and "benchmark.1.spec" not in run.keys
    assert run.keys["check"] == "fail"


def test_standalone_reads_task_yml_and_writes_json(tmp_path):
    out = tmp_path / "result.json"
    run = run_eval("test", "--submission", GOOD, "--only", "0,3", "--json", str(out))
    assert run.code == 0, run.stderr
    assert "2 of 2 cases passed" in run.stdout and "no CUDA GPU found" in run.stderr
    doc = json.loads(out.read_text())
    assert [c["index"] for c in doc["cases"]] == [0, 3] and doc["passed"] is True
    assert doc["system"]["torch"]


def test_standalone_benchmark_table_and_robustness_set(tmp_path):
    run = run_eval("benchmark", "--submission", GOOD, "--set", "robustness", "--only", "0,3", "--max-runs", "3")
    assert run.code == 0, run.stderr
    assert "geometric mean" in run.stdout and "2 of 2 cases passed" in run.stdout


def test_missing_submission_and_bad_only_are_one_line_usage_errors():
    run = run_eval("test", "--submission", "/nope/submission.py")
    assert run.code == 2 and "no submission file at /nope/submission.py" in run.stderr
    run = run_eval("test", "--submission", GOOD, "--only", "99")
    assert run.code == 2 and "selects none of the 10 cases" in run.stderr


def test_a_cuda_only_submission_is_not_run_on_the_cpu_a_status_of_its_own(small_spec, tmp_path):
    out = tmp_path / "out.json"
    run = run_eval("test", small_spec, "--submission", submission("needs_cuda.py"), "--json", str(out),
                   popcorn=True)
    assert run.code == 114, run.stderr
    assert run.keys["test.0.error"] == "needs a CUDA GPU (this machine has none)"
    assert run.keys["test.1.not_run"] == "needs a CUDA GPU (this machine has none)"
    assert run.keys["test.0.status"] == "fail" and run.keys["check"] == "fail"     # the competition's runner
    assert all(c["not_run"] == "needs a CUDA GPU (this machine has none)"
               for c in json.loads(out.read_text())["cases"])
    shown = run_eval("test", small_spec, "--submission", submission("needs_cuda.py"))
    assert "2 not judged here: needs a CUDA GPU" in shown.stdout and "cases failed" not in shown.stderr
    assert "case 0: not run" in shown.stderr


def test_a_wrong_case_beside_a_not_run_one_still_fails_the_run(small_spec):
    run = run_eval("test", small_spec, "--submission", submission("wrong_then_needs_cuda.py"))
    assert run.code == 112, run.stderr
    assert "1 not judged here" in run.stdout


def test_the_same_traceback_is_shown_once_not_per_case(small_spec):
    run = run_eval("test", small_spec, "--submission", submission("needs_cuda.py"))
    assert run.code == 114           # not run here: needs a CUDA GPU
    assert run.stdout.count("AssertionError: Torch not compiled with CUDA enabled") == 1, run.stdout
    assert "case 1" in run.stdout and "same error as case 0" in run.stdout


def test_a_scaled_mm_submission_passes_off_blackwell_and_says_it_was_emulated(small_spec):
    run = run_eval("test", small_spec, "--submission", submission("scaled_mm_lookalike.py"), popcorn=True)
    assert run.code == 0, run.stderr
    assert run.keys["check"] == "pass"
    assert "emulated torch._scaled_mm: times are not comparable" in run.stderr


def test_no_emulation_notice_when_the_submission_never_called_scaled_mm(small_spec):
    run = run_eval("test", small_spec, "--submission", GOOD, popcorn=True)
    assert run.code == 0 and "emulated torch._scaled_mm" not in run.stderr


def test_each_verb_has_its_own_help_and_only_its_options():
    helps = {verb: run_eval(verb, "--help").stdout for verb in
             ("test", "benchmark", "leaderboard", "profile", "diagnose", "compile")}
    assert len(set(helps.values())) == 6                       # six different texts
    assert "--timing" in helps["benchmark"] and "--timing" not in helps["test"]
    assert "--arch" in helps["compile"] and "--arch" not in helps["benchmark"]
    assert "--set" not in helps["compile"]
    wrong = run_eval("test", "--timing", "per-call")
    assert wrong.code == 2 and "No such option" in wrong.stderr and "--timing" in wrong.stderr


def test_a_task_whose_reference_fails_to_import_is_one_clear_line(tmp_path):
    """The worker starts before the parent imports the reference (arena/worker/spawn.py); a reference that raises
    ends the run with one line (the waiting worker is ended with the rest)."""
    for name in ("task.yml", "task.py", "utils.py"):
        (tmp_path / name).write_text(open(os.path.join(ROOT, name)).read())
    (tmp_path / "reference.py").write_text("raise RuntimeError('broken reference')\n")
    run = run_eval("test", spec_file("m: 128; n: 256; k: 256; l: 1; seed: 1\n"), "--task", str(tmp_path))
    assert run.code == 113, run.stderr
    assert run.stderr.strip().splitlines()[-1] == (f"error: the task's reference.py ({tmp_path}) failed to import: "
                                                   "RuntimeError: broken reference")
    assert "Traceback" not in run.stderr


def test_a_submission_whose_popcorn_header_names_another_task_is_told_which_task_to_pass(tmp_path):
    from arena.submission_file import SubmissionFile
    from arena.taskdef.definition import load_task, task_named_elsewhere
    written = tmp_path / "gemv_kernel.py"
    written.write_text("#!POPCORN leaderboard nvfp4_gemv\n#!POPCORN gpu B200\n"
                       + open(GOOD).read())
    run = run_eval("test", "--only", "0", "--submission", str(written))
    assert ("notice: gemv_kernel.py names the leaderboard nvfp4_gemv (its #!POPCORN line), but this run "
            "evaluates nvfp4_gemm: pass --task tasks/nvfp4_gemv") in run.stderr
    assert task_named_elsewhere(SubmissionFile.read(str(written)), load_task(os.path.join(ROOT, "tasks", "nvfp4_gemv"))) == ""
    assert task_named_elsewhere(SubmissionFile.read(GOOD), load_task(ROOT)) == ""           # no header: nothing to say


def test_without_a_header_a_submission_that_speaks_only_of_another_task_gets_a_notice(tmp_path):
    """No #!POPCORN line: the file's name and source decide. `gemm` is every GEMM task's word, so it never
    suggests nvfp4_gemm and never proves a file is not a gemm one; the runner's `modal_` prefix is the same task."""
    from arena.submission_file import SubmissionFile
    from arena.taskdef.definition import load_task, task_named_elsewhere
    gemm, gemv = load_task(ROOT), load_task(os.path.join(ROOT, "tasks", "nvfp4_gemv"))
    dual = load_task(os.path.join(ROOT, "tasks", "nvfp4_dual_gemm"))
    gemv_file = tmp_path / "gemv_submission.py"
    gemv_file.write_text(open(os.path.join(ROOT, "tasks", "nvfp4_gemv", "torch_submission.py")).read())
    gemv_file = str(gemv_file)
    assert task_named_elsewhere(SubmissionFile.read(gemv_file), gemm).startswith("gemv_submission.py speaks of nvfp4_gemv (2 mentions)")
    assert task_named_elsewhere(SubmissionFile.read(gemv_file), gemm).endswith("if it was written for nvfp4_gemv, pass --task tasks/nvfp4_gemv")
    assert task_named_elsewhere(SubmissionFile.read(gemv_file), gemv) == ""
    dual_file = tmp_path / "kernel.py"
    dual_file.write_text("# NVFP4 dual GEMM: two GEMMs sharing A, a gemm epilogue; gemm gemm gemm\n"
                         "def dual_gemm_kernel(): pass\n")
    assert task_named_elsewhere(SubmissionFile.read(str(dual_file)), dual) == ""
    assert "speaks of nvfp4_dual_gemm (2 mentions)" in task_named_elsewhere(SubmissionFile.read(str(dual_file)), gemm)
    moded = tmp_path / "modal.py"
    moded.write_text("#!POPCORN leaderboard modal_nvfp4_dual_gemm\n" + open(GOOD).read())
    assert task_named_elsewhere(SubmissionFile.read(str(moded)), dual) == ""
    for own in (GOOD, os.path.join(ROOT, "submission.py")):
        assert task_named_elsewhere(SubmissionFile.read(own), gemm) == ""
