"""eval.py when things go wrong, as real subprocesses, pipes and signals: a hang stops the run, bad output paths
stop it before anything runs, a signal keeps the finished cases, an import failure is one line, the cleanup
spares processes the evaluator did not start, plain progress names the true step as it happens."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from arena.run.limits import AUTO_FLOOR_S, auto_timeout
from tests.evalrun import GOOD, ROOT, SMALL, as_from_a_terminal, run_eval, spec_file, submission

MANY = "".join(f"m: 128; n: 256; k: 256; l: 1; seed: {i}\n" for i in range(8))


def test_a_hang_ends_the_remaining_cases_at_once_naming_the_case_that_hung():
    run = run_eval("test", "--submission", submission("hangs.py"), "--timeout", "3", popcorn=True)
    assert run.code == 112
    assert run.keys["test-count"] == "10" and "timed out after 3 s" in run.keys["test.0.error"]
    assert all(run.keys[f"test.{i}.error"] == "not run: same hang as case 0 (--keep-going runs every case)"
               for i in range(1, 10))
    assert run.seconds < 45, run.seconds          # one timeout, not ten


def test_the_default_timeout_fits_the_case_and_the_device():
    small = auto_timeout("cpu", 1 << 20, 1, None)
    assert small == AUTO_FLOOR_S + 2.0
    assert auto_timeout("cpu", 50 << 20, 20, None) > auto_timeout("cuda", 50 << 20, 20, None)
    assert auto_timeout("cpu", 1 << 20, 10, 0.5) == AUTO_FLOOR_S + 100     # 20 times the slowest call seen
    assert auto_timeout("cpu", 1 << 20, 1, None, builds=True) == small + 300
    # --emulate-blackwell: the tcgen05 work runs in software, 10 s per MiB of inputs, and builds take longer
    assert auto_timeout("emulated", 50 << 20, 1, None) == AUTO_FLOOR_S + 500
    assert auto_timeout("emulated", 1 << 20, 1, None, builds=True) == AUTO_FLOOR_S + 10 + 900


def test_bad_output_paths_stop_the_run_before_anything_runs(tmp_path):
    for args, fragment in [
            (("--json", "/no/such/folder/out.json"), "cannot write the JSON file /no/such/folder/out.json: no folder"),
            (("--json", str(tmp_path)), f"cannot write the JSON file {tmp_path}: it is a folder"),
            (("--json", "/sys/arena-out.json"), "cannot write the JSON file /sys/arena-out.json"),
            (("--report", "/no/such/folder/r.html"), "cannot write the report"),
            (("--plots", "/sys/arena-plots"), "cannot write the plots folder")]:
        run = run_eval("test", "--submission", GOOD, *args)
        assert run.code == 2, (args, run.stderr)
        assert len(run.stderr.strip().splitlines()) == 1, run.stderr
        assert fragment in run.stderr and run.stdout == "" and "[arena]" not in run.stderr, run.stderr


def _stop_after_first_case(signum, tmp_path, popcorn=False):
    """Start a 8-case run of a slow kernel, send `signum` once case 0 finished (read from its stderr pipe)."""
    out = tmp_path / "out.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("POPCORN_")}
    pass_fds, read_end = (), None
    if popcorn:
        read_end, write_end = os.pipe()
        env["POPCORN_FD"], pass_fds = str(write_end), (write_end,)
    process = subprocess.Popen([sys.executable, "eval.py", "test", spec_file(MANY), "--submission",
                                submission("slow_steps.py"), "--json", str(out)], cwd=ROOT, env=env,
                               pass_fds=pass_fds, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=as_from_a_terminal)
    if popcorn:
        os.close(write_end)
    seen = []
    for line in process.stderr:
        seen.append(line)
        if line.startswith("[arena] case 0: pass"):
            assert json.loads(out.read_text())["cases_finished"] == 1     # written before the run ends
            process.send_signal(signum)
            break
    raw = os.fdopen(read_end).read() if popcorn else ""
    stdout, rest = process.communicate(timeout=120)
    return process.returncode, stdout, "".join(seen) + rest, json.loads(out.read_text()), raw


def test_sigterm_keeps_every_finished_case_in_the_table_and_the_json(tmp_path):
    code, stdout, stderr, doc, _ = _stop_after_first_case(signal.SIGTERM, tmp_path)
    assert code == 143, stderr
    assert doc["complete"] is False and doc["cases_total"] == 8 and doc["cases_finished"] >= 1
    assert doc["cases"][0]["passed"] is True
    finished = doc["cases_finished"]
    assert f"error: stopped by SIGTERM: {finished} of 8 cases finished and reported, {8 - finished} not reached" \
        in stderr
    assert "seed: 0" in stdout and "seed: 7" not in stdout


def test_sigint_under_popcorn_writes_the_finished_cases_lines(tmp_path):
    code, _, stderr, doc, raw = _stop_after_first_case(signal.SIGINT, tmp_path, popcorn=True)
    assert code == 130, stderr
    lines = dict(line.split(": ", 1) for line in raw.splitlines())
    assert lines["test.0.status"] == "pass" and lines["check"] == "fail"
    assert int(lines["test-count"]) == doc["cases_finished"] < 8


def test_an_import_failure_is_one_line_with_the_submissions_own_traceback_once():
    run = run_eval("test", "--submission", submission("syntax_error.py"))
    assert run.code == 112
    assert "none of the 10 cases ran: cannot import submission: SyntaxError" in run.stdout
    assert run.stdout.count("Traceback") == 1 and run.stdout.count("def custom_kernel(data)") == 1
    assert "frozen importlib" not in run.stdout and "arena/worker/server.py" not in run.stdout
    assert run.stderr.strip().splitlines()[-1].startswith("error: cannot import submission: SyntaxError")
    assert "(1/10)" not in run.stderr


def test_a_failing_call_shows_no_frame_of_the_harness():
    run = run_eval("test", spec_file(SMALL), "--submission", submission("needs_cuda.py"))
    assert run.code == 114 and "needs_cuda.py" in run.stdout
    assert "arena/worker/server.py" not in run.stdout, run.stdout


def test_the_cleanup_spares_a_tee_that_was_the_evaluators_child_before_it_began(tmp_path):
    """`exec python eval.py ... 2> >(tee log)`: the tee becomes eval.py's child; it must keep every line."""
    log, report = tmp_path / "log", tmp_path / "r.html"
    command = (f"exec {sys.executable} eval.py test {spec_file(SMALL)} --submission {GOOD} --report {report} "
               f"2> >(tee {log} >/dev/null)")
    done = subprocess.run(["bash", "-c", command], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    time.sleep(0.5)          # the tee writes its last line after eval.py exits
    text = log.read_text()
    assert "2 of 2 cases passed" in text and f"report: {report}" in text, text


def test_a_spec_file_that_is_not_utf8_is_one_line_and_113(tmp_path):
    bad = tmp_path / "spec.txt"
    bad.write_bytes(b"m: 128; n: 256; k: 256; l: 1; seed: 1\nm: 12\xff8\n")
    for popcorn in (False, True):
        run = run_eval("test", str(bad), "--submission", GOOD, popcorn=popcorn)
        assert run.code == 113, run.stderr
        assert run.stderr.strip().splitlines() == [f"error: spec file {bad} is not UTF-8 text (byte 0xff on line 2)"]


def test_a_missing_task_folder_is_a_usage_error():
    run = run_eval("test", "--task", "/no/such/task")
    assert run.code == 2 and run.stderr.strip() == \
        "error: no task folder /no/such/task (--task takes a folder holding task.yml)"


def test_plain_progress_in_a_pipe_names_each_step_as_it_happens():
    env = {k: v for k, v in os.environ.items() if not k.startswith("POPCORN_")}
    env["ARENA_PROGRESS_EVERY_S"] = "1"
    process = subprocess.Popen([sys.executable, "eval.py", "test", spec_file(SMALL), "--submission",
                                submission("slow_steps.py")], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    stamped, started = [], time.perf_counter()
    for line in process.stderr:
        stamped.append((time.perf_counter() - started, line.rstrip()))
    process.communicate(timeout=60)
    assert process.returncode == 0, stamped
    running = [(t, line) for t, line in stamped if "case 0 (1/2)" in line and "running custom_kernel" in line]
    assert len(running) >= 2, stamped               # the step, then its repeat while the 2.5 s call lasts
    assert "(1 s)" in running[1][1] or "(2 s)" in running[1][1], running
    finished = next(t for t, line in stamped if line.startswith("[arena] case 0: pass"))
    assert 0.5 < finished - running[0][0] < 4, stamped    # the line came while the step was going on
    assert not any("generating inputs" in line and "(" in line.split(":")[-1] for _, line in stamped)


def test_a_case_too_big_for_the_rules_or_the_memory_is_refused_with_one_line_before_anything_runs():
    huge = run_eval("test", spec_file("m: 10000000; n: 256; k: 256; l: 1; seed: 1\n"), "--submission", GOOD)
    assert huge.code == 113 and huge.stderr.strip().endswith("m must be at most 65536, got 10000000")
    big = run_eval("test", spec_file("m: 60000; n: 60000; k: 16384; l: 1; seed: 1\n"), "--submission", GOOD)
    assert big.code == 113 and len(big.stderr.strip().splitlines()) == 1, big.stderr
    assert "needs about 85.4 GiB of memory; this machine has" in big.stderr and big.seconds < 20


def test_a_worker_ended_by_the_out_of_memory_killer_is_named_as_such():
    from arena.worker.client import describe_exit
    assert "out-of-memory killer" in describe_exit(-9, out_of_memory=True)
    assert describe_exit(-9) == "killed by SIGKILL"


def test_help_names_exit_codes_the_spec_grammar_defaults_and_paths_without_cutting_a_summary():
    top = run_eval("--help").stdout
    commands = top.split("Commands:")[1].split("Exit codes:")[0]
    assert "..." not in commands and "batch" in commands and "112" in top and "113" in top and "128+N" in top
    assert "m: 128; n: 256; k: 256; l: 1; seed: 1111" in top and "`tests`" in top
    for verb in ("test", "benchmark", "leaderboard", "profile", "diagnose", "compile", "batch"):
        text = run_eval(verb, "--help").stdout
        assert "TEXT" not in text, (verb, text)
    assert "first" in run_eval("diagnose", "--help").stdout


def test_diagnose_without_a_case_probes_the_first_case_that_fails_under_test():
    broken = os.path.join(ROOT, "tests", "broken", "layout_kgroup_swapped.py")
    run = run_eval("diagnose", "--submission", broken)
    assert run.code == 112
    assert "diagnose: case 0 of tests fails under test (wrong result" in run.stderr
    assert "kgroup_swapped" in run.stdout


def test_plots_carry_a_title_axes_and_a_legend_and_a_cpu_run_draws_no_empty_speed_of_light_bar(tmp_path):
    from tests.test_progress_report import svg_texts
    plots = tmp_path / "plots"
    run = run_eval("benchmark", spec_file("m: 128; n: 7168; k: 2048; l: 1; seed: 3\n"), "--submission", GOOD,
                   "--max-time", "1", "--plots", str(plots), "--quiet")
    assert run.code == 0, run.stderr
    assert sorted(os.listdir(plots)) == ["case0_samples.svg"]         # no SOL bar for a CPU time
    texts = svg_texts((plots / "case0_samples.svg").read_text())
    assert texts[0] == "case 0: m: 128; n: 7168; k: 2048; l: 1; seed: 3", texts     # the title
    assert texts[1].startswith("n = ") and "red line: the mean" in texts[1]          # the legend
    assert "samples" in texts and "µs per call" in texts                             # both axes labelled


def test_a_report_that_cannot_be_written_at_the_end_is_an_error_line_and_112():
    run = run_eval("test", spec_file(SMALL), "--submission", GOOD, "--report", "/dev/full", "--json", "/dev/full")
    assert run.code == 112, run.stderr
    assert "error: cannot write the report or plots: [Errno 28] No space left on device" in run.stderr
    assert "error: cannot write the JSON file /dev/full: No space left on device" in run.stderr
    assert os.path.exists("/dev/full") and not os.path.isfile("/dev/full")      # never replaced


def test_one_sample_is_one_sample_and_a_cpu_run_announces_no_cuda_build():
    import io
    from arena.report.progress import Progress, gpu_present
    stream = io.StringIO()
    progress = Progress(stream=stream, live=False)
    progress.case(0, "m: 1", 1, "timing")
    progress.timing(1, 1000.0, 10.0)
    assert progress.text.endswith("timing, 1 sample, mean 1.00 µs")        # one sample: no spread to show
    progress.timing(2, 1000.0, 10.0)
    assert progress.text.endswith("timing, 2 samples, mean 1.00 ± 0.01 µs")
    progress.close()
    if not gpu_present():
        run = run_eval("test", "--only", "0", "--quiet")          # the shipped CUDA submission on a CPU
        assert "building CUDA extension" not in run.stderr
        loud = run_eval("test", "--only", "0")
        assert loud.code == 114 and "building CUDA extension" not in loud.stderr, loud.stderr
        assert "arena/worker/server.py" not in loud.stdout and "needs a CUDA GPU" in loud.stdout


@pytest.mark.skipif(any(os.path.exists(n) for n in ("/dev/nvidiactl", "/dev/nvidia0")), reason="a GPU is here")
@pytest.mark.parametrize("task", ["nvfp4_moe", "fp8_attention"])
def test_benchmarks_that_need_a_gpu_are_refused_up_front_on_a_cpu(task):
    """Their inputs alone took minutes (nvfp4_moe) or the out-of-memory killer (fp8_attention) on a CPU."""
    folder = os.path.join(ROOT, "tasks", task)
    run = run_eval("benchmark", "--task", folder, "--submission", os.path.join(folder, "torch_submission.py"),
                   timeout=60)
    assert run.code == 113 and run.seconds < 30, (run.code, run.seconds, run.stderr[-800:])
    assert f"{task}'s benchmarks need a CUDA GPU" in run.stderr and "--set tests" in run.stderr, run.stderr


# ---- a wrong kernel's verdict: the first failure diagnosed in full, the same pattern said in one line -----

SAME_PATTERN = "".join(f"m: 256; n: 256; k: 512; l: 1; seed: {i}\n" for i in range(4))
BROKEN = os.path.join(ROOT, "tests", "broken")


def test_cases_failing_in_the_same_pattern_are_diagnosed_once_and_said_to_fail_like_it(tmp_path):
    out = tmp_path / "out.json"
    run = run_eval("test", spec_file(SAME_PATTERN), "--submission", os.path.join(BROKEN, "layout_rows_plain.py"),
                   "--json", str(out))
    assert run.code == 112, run.stderr
    cases = json.loads(out.read_text())["cases"]
    assert "32-row and 4-row-group roles swapped" in cases[0]["diagnosis"]
    for case in cases[1:]:
        assert case["diagnosis"].startswith("Fails like case 0 (99."), case["diagnosis"]
        assert "--diagnose-all" in case["diagnosis"] and "wrong rows: every row" in case["evidence"]
    full = run_eval("test", spec_file(SAME_PATTERN), "--submission", os.path.join(BROKEN, "layout_rows_plain.py"),
                    "--json", str(out), "--diagnose-all")
    assert full.code == 112
    assert all("32-row and 4-row-group roles swapped" in c["diagnosis"] for c in json.loads(out.read_text())["cases"])


def test_a_new_pattern_gets_a_full_diagnosis_and_no_internal_key_reaches_the_user(tmp_path):
    # m=128: only B's second row block is misread (columns 128-255 wrong); m=256: A's too (every row)
    spec = "m: 128; n: 256; k: 512; l: 1; seed: 1\nm: 256; n: 256; k: 512; l: 1; seed: 2\n"
    out = tmp_path / "out.json"
    run = run_eval("test", spec_file(spec), "--submission", os.path.join(BROKEN, "layout_rowblock_stride.py"),
                   "--json", str(out))
    cases = json.loads(out.read_text())["cases"]
    assert all("row block 0 reads its scales right" in c["diagnosis"] for c in cases), cases
    from arena.diagnose.hypotheses import LAYOUT_BUGS
    shown = run.stdout + run.stderr
    for key in list(LAYOUT_BUGS) + ["view_", "nest_", "swap_"]:
        assert f"{key}:" not in shown and f"{key}_partial" not in shown, key


def test_sigint_stops_the_run_even_when_the_parent_blocked_it(tmp_path):
    """A blocked signal mask is inherited across fork and exec: eval.py unblocks SIGINT, so Ctrl-C still ends
    the run with the cases it finished."""
    out = tmp_path / "out.json"
    process = subprocess.Popen([sys.executable, "eval.py", "test", spec_file(MANY), "--submission",
                                submission("slow_steps.py"), "--json", str(out)], cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: (as_from_a_terminal(),
                                                   signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})))
    for line in process.stderr:
        if line.startswith("[arena] case 0: pass"):
            process.send_signal(signal.SIGINT)
            break
    process.communicate(timeout=120)
    assert process.returncode == 130
    assert json.loads(out.read_text())["cases_finished"] < 8


def test_under_emulation_the_first_request_gets_the_build_allowance_even_without_a_build_in_sight():
    """A submission that only calls torch._scaled_mm (emulated) builds nothing of its own, yet its first call
    in a batch of 40 emulated evaluations on four GPUs passed the 30 s floor on three public files."""
    from arena.run.evaluator import Evaluator
    from arena.run.limits import EMULATED_BUILD_ALLOWANCE_S, Limits
    evaluator = Evaluator(None, None, "cpu", Limits(emulated=True))
    first = evaluator.timeout([])
    assert first >= AUTO_FLOOR_S + EMULATED_BUILD_ALLOWANCE_S
    native = Evaluator(None, None, "cpu", Limits())
    assert native.timeout([]) == AUTO_FLOOR_S          # natively nothing changes: no build, the floor
