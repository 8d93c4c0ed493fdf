"""`eval.py batch` on a real local Ray cluster (CPU): every verdict equals the verdict of a single `eval.py test`
run of the same file; a batch is resumable; a lost evaluating process is retried; a submission cannot reach the
batch's own cluster. All through real subprocesses."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from tests.evalrun import ROOT, as_from_a_terminal, run_eval, run_on_terminal, spec_file

ray = pytest.importorskip("ray", reason="eval.py batch needs Ray (python3 -m pip install 'ray>=2.9')")

ONE = "m: 128; n: 256; k: 256; l: 1; seed: 1111\n"
TIMEOUT = "12"          # seconds per case: the hanging submission's verdict comes at this limit
pytestmark = [pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandbox is Linux-only"),
              pytest.mark.slow]     # Ray batches of real evaluations: `pytest -m slow`

# A dozen submissions of ours: correct, broken, cheating, crashing, hanging; and the verdict a single run gives.
DOZEN = {
    "submissions/torch_reference.py": True,
    "tests/broken/honest_blocked.py": True,
    "tests/exploits/honest_fresh_output.py": True,
    "tests/exploits/ray_escape.py": True,           # computes the right answer; its escape must fail
    "tests/broken/zeros.py": False,
    "tests/broken/transposed.py": False,
    "tests/broken/layout_kgroup_swapped.py": False,
    "tests/exploits/out_fp32.py": True,             # right values in fp32: the competition passes it (a warning)
    "tests/exploits/out_view_of_input.py": False,
    "tests/submissions/crashes.py": False,
    "tests/submissions/syntax_error.py": False,
    "tests/submissions/hangs.py": False,
}
HELPERS = ["tests/broken/_kernel.py", "tests/exploits/_common.py"]


@pytest.fixture(scope="module")
def dozen(tmp_path_factory):
    """The dozen in one folder (with the helpers they import, which batch skips as "_" files)."""
    folder = tmp_path_factory.mktemp("dozen")
    for path in [*DOZEN, *HELPERS]:
        shutil.copy(os.path.join(ROOT, path), folder / os.path.basename(path))
    return folder


def run_batch(*args, env=None, timeout=600) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("POPCORN_")}
    environment.update(env or {})
    return subprocess.run([sys.executable, os.path.join(ROOT, "eval.py"), "batch", *args], cwd=ROOT,
                          env=environment, capture_output=True, text=True, timeout=timeout)


def read_jsonl(path) -> list[dict]:
    return [json.loads(line) for line in open(path) if line.strip()]


@pytest.fixture(scope="module")
def dozen_batch(dozen, tmp_path_factory):
    jsonl = tmp_path_factory.mktemp("rows") / "rows.jsonl"
    started = time.perf_counter()
    done = run_batch(str(dozen), "--spec", spec_file(ONE), "--jsonl", str(jsonl), "--timeout", TIMEOUT)
    return done, jsonl, time.perf_counter() - started


def test_every_batch_verdict_equals_the_single_run_verdict(dozen, dozen_batch):
    done, jsonl, _ = dozen_batch
    rows = {os.path.basename(r["path"]): r for r in read_jsonl(jsonl)}
    assert sorted(rows) == sorted(os.path.basename(p) for p in DOZEN), done.stderr[-2000:]
    assert done.returncode == 112, done.stderr[-2000:]         # some failed
    spec = spec_file(ONE)
    for path, expected in DOZEN.items():
        name = os.path.basename(path)
        single = run_eval("test", spec, "--submission", str(dozen / name), "--timeout", TIMEOUT,
                          json_report=True, timeout=300)
        row = rows[name]
        assert (single.code == 0) == expected, (name, single.stderr[-1500:])
        assert row["passed"] == expected and row["evaluated"], (name, row)
        assert row["exit_code"] == single.code, (name, row, single.code)
        single_cases = [(c["index"], c["passed"], c["error"]) for c in (single.doc or {}).get("cases", [])]
        assert [(c["index"], c["passed"], c["error"]) for c in row["cases"]] == single_cases, name
        assert len(row["sha256"]) == 64 and row["task"] == "nvfp4_gemm" and row["mode"] == "test"
    assert "hangs.py" in rows and "timed out after 12 s" in rows["hangs.py"]["error"]


def test_the_ranked_table_and_the_progress_lines(dozen_batch):
    done, _, _ = dozen_batch
    table = done.stdout
    assert "batch: nvfp4_gemm test" in table
    passed_at = [table.find(os.path.basename(p)) for p, ok in DOZEN.items() if ok]
    failed_at = [table.find(os.path.basename(p)) for p, ok in DOZEN.items() if not ok]
    assert min(passed_at) > 0 and max(passed_at) < min(failed_at), table     # passing rows ranked first
    progress = [line for line in done.stderr.splitlines() if line.startswith("[batch] ")]
    assert progress[0].startswith("[batch] starting Ray (a local instance)"), progress
    assert progress[1].startswith("[batch] 12 submission(s) on ") and "CPU core(s), no GPU" in progress[1]
    assert sum(1 for line in progress if "/12 " in line) == 12, progress


def test_a_submission_cannot_run_code_through_the_batch_cluster(dozen, dozen_batch):
    """ray_escape joins the cluster with the evaluator's token and starts a Ray task outside the sandbox;
    before the worker had its own network namespace, that task wrote `escaped` (watched: it did)."""
    assert not (dozen / "escaped").exists(), (dozen / "escaped").read_text()


def test_a_second_batch_evaluates_only_what_changed(dozen, dozen_batch, tmp_path):
    _, jsonl, _ = dozen_batch
    again = tmp_path / "rows.jsonl"
    shutil.copy(jsonl, again)
    folder = tmp_path / "subs"
    folder.mkdir()
    for name in ("torch_reference.py", "zeros.py", "_kernel.py"):
        shutil.copy(dozen / name, folder / name)
    with open(folder / "zeros.py", "a") as f:
        f.write("\n# changed\n")
    report = tmp_path / "rank.html"
    done = run_batch(str(folder), "--spec", spec_file(ONE), "--jsonl", str(again), "--timeout", TIMEOUT,
                     "--report", str(report))
    assert done.returncode == 112, done.stderr[-2000:]
    page = report.read_text()
    assert "1 of 2 submissions passed" in page
    assert 0 < page.find("torch_reference.py") < page.find("zeros.py"), page      # the passing row ranks first
    assert "wrong result" in page
    assert "[batch] 1 row(s) already in" in done.stderr, done.stderr
    assert "[batch] 1 submission(s) on " in done.stderr, done.stderr
    rows = read_jsonl(again)
    assert len(rows) == len(DOZEN) + 1                       # only the changed file got a new row
    assert os.path.basename(rows[-1]["path"]) == "zeros.py" and rows[-1]["passed"] is False


def test_an_evaluation_whose_process_is_lost_runs_again(tmp_path):
    """SIGKILL to the Ray worker that runs an evaluation (as a lost node would): its eval.py dies with it
    and Ray runs the evaluation again; the row says 2 attempts and holds the single-run verdict."""
    submission = tmp_path / "slow_honest.py"
    shutil.copy(os.path.join(ROOT, "tests", "batch", "slow_honest.py"), submission)
    jsonl = tmp_path / "rows.jsonl"
    environment = {k: v for k, v in os.environ.items() if not k.startswith("POPCORN_")}
    proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "eval.py"), "batch", str(submission), "--spec",
                             spec_file(ONE), "--jsonl", str(jsonl), "--timeout", "60"], cwd=ROOT, env=environment,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    victim = evaluator = None
    deadline = time.time() + 120
    while time.time() < deadline and victim is None:
        for pid, cmdline in _processes():
            args = cmdline.split()
            if len(args) > 2 and args[1].endswith("eval.py") and args[2] == "test" and "slow_honest.py" in cmdline:
                evaluator, victim = pid, _parent(pid)
        time.sleep(0.2)
    assert victim, "no eval.py run of slow_honest.py appeared"
    time.sleep(2)                   # inside its first (6 s) call
    os.kill(victim, signal.SIGKILL)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr[-2000:]
    row, = read_jsonl(jsonl)
    assert row["passed"] and row["evaluated"] and row["attempts"] == 2, row
    assert not os.path.exists(f"/proc/{evaluator}") or _state(evaluator) == "Z", "the lost eval.py run lived on"


def test_without_ray_batch_says_so_in_one_line(tmp_path):
    fake = tmp_path / "ray"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('No module named ray (test)')\n")
    done = run_batch("submissions/torch_reference.py", env={"PYTHONPATH": str(tmp_path)})
    assert done.returncode == 2
    assert done.stderr.strip() == ("error: batch needs Ray, which is not installed: "
                                   "python3 -m pip install 'ray>=2.9'"), done.stderr


def test_bad_paths_are_one_line_each_and_the_rest_is_evaluated(tmp_path):
    jsonl = tmp_path / "rows.jsonl"
    done = run_batch("no/such/file.py", str(tmp_path), "submissions/torch_reference.py", "--spec", spec_file(ONE),
                     "--jsonl", str(jsonl))
    assert "error: no/such/file.py: no such file or folder" in done.stderr
    assert f"error: {tmp_path}: no submission (*.py) in this folder" in done.stderr
    assert done.returncode == 112                             # the run went on, but not every input was good
    row, = read_jsonl(jsonl)
    assert row["passed"] is True


def _processes():
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    yield int(entry), f.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[-1].split()[1])


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return "gone"


def test_a_node_lost_mid_evaluation_is_replaced_and_the_work_reruns_there(tmp_path):
    """A real multi-node Ray cluster on this machine (ray.cluster_utils): a head that runs nothing and one
    worker node. `batch --address` ships the evaluator to the cluster; the worker node is removed while it
    evaluates, a new node joins, and the evaluation runs again there."""
    from ray.cluster_utils import Cluster
    submission = tmp_path / "slow_honest.py"
    shutil.copy(os.path.join(ROOT, "tests", "batch", "slow_honest.py"), submission)
    jsonl = tmp_path / "rows.jsonl"
    cluster = Cluster(initialize_head=True, connect=False, head_node_args={"num_cpus": 0})
    try:
        first = cluster.add_node(num_cpus=1)
        environment = {k: v for k, v in os.environ.items() if not k.startswith(("POPCORN_", "RAY_ADDRESS"))}
        proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "eval.py"), "batch", str(submission),
                                 "--spec", spec_file(ONE), "--jsonl", str(jsonl), "--timeout", "60",
                                 "--address", cluster.address], cwd=ROOT, env=environment,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 180
        while time.time() < deadline and not _an_eval_of("slow_honest.py"):
            time.sleep(0.2)
        assert _an_eval_of("slow_honest.py"), "no eval.py run of slow_honest.py appeared"
        time.sleep(2)
        cluster.remove_node(first, allow_graceful=False)
        cluster.add_node(num_cpus=1)
        stdout, stderr = proc.communicate(timeout=400)
    finally:
        cluster.shutdown()
    assert proc.returncode == 0, stderr[-3000:]
    row, = read_jsonl(jsonl)
    assert row["passed"] and row["attempts"] == 2, row


def _an_eval_of(name: str) -> bool:
    for _, cmdline in _processes():
        args = cmdline.split()
        if len(args) > 2 and args[1].endswith("eval.py") and args[2] == "test" and name in cmdline:
            return True
    return False


def most_at_once(spans: list) -> int:
    """The most (start, end) spans that overlap at one moment."""
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    now = most = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


@pytest.mark.parametrize("gpus, per_gpu", [(2, 1), (1, 2)])
def test_evaluations_per_gpu_at_a_time_over_every_gpu(tmp_path, gpus, per_gpu):
    """Ray's GPU accounting, exercised on this CPU machine by declaring GPUs (`--gpus`; the evaluations
    themselves run on the CPU): each evaluation holds one GPU id (its CUDA_VISIBLE_DEVICES), every id is used,
    exactly `--per-gpu` evaluations hold one id at once at the most, and two ids work at the same time. (Ray
    also gives each evaluation a core: on 2 cores, 2 evaluations at once in all.)"""
    for number in range(4):
        with open(tmp_path / f"slow_{number}.py", "w") as f:
            f.write(open(os.path.join(ROOT, "tests", "batch", "slow_honest.py")).read() + f"\n# copy {number}\n")
    jsonl = tmp_path / "rows.jsonl"
    done = run_batch(str(tmp_path), "--spec", spec_file(ONE), "--jsonl", str(jsonl), "--gpus", str(gpus),
                     "--per-gpu", str(per_gpu))
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"[batch] 4 submission(s) on {gpus} GPU(s), {per_gpu} evaluation(s) per GPU at once" in done.stderr, \
        done.stderr
    rows = read_jsonl(jsonl)
    by_gpu = {}
    for row in rows:
        by_gpu.setdefault(row["cuda_visible_devices"], []).append((row["started"], row["finished"]))
    assert sorted(by_gpu) == [str(i) for i in range(gpus)], by_gpu
    assert [most_at_once(spans) for spans in by_gpu.values()] == [per_gpu] * gpus, by_gpu
    if gpus == 2:
        first, second = (sorted(spans)[0] for spans in by_gpu.values())
        assert max(first[0], second[0]) < min(first[1], second[1]), by_gpu     # the two GPUs worked at once


def test_gpus_with_an_address_is_one_line():
    done = run_batch("submissions/torch_reference.py", "--gpus", "1", "--address", "127.0.0.1:1")
    assert done.returncode == 2
    assert done.stderr.strip() == ("error: --gpus sets what a local Ray instance offers; a cluster (--address) "
                                   "declares its own"), done.stderr


def test_on_a_terminal_batch_draws_a_live_bar(tmp_path):
    """stderr a real pseudo-terminal: rich draws the bar (control sequences, "N/M" done) while the per-
    submission lines still come; the ranked table goes to stdout."""
    jsonl = tmp_path / "rows.jsonl"
    code, text, stdout = run_on_terminal(["batch", "submissions/torch_reference.py", "tests/batch/slow_honest.py",
                                          "--spec", spec_file(ONE), "--jsonl", str(jsonl)])
    assert code == 0, text[-2000:]
    assert "\x1b[" in text and "0/2" in text and "1/2" in text, text[-2000:]
    assert "[batch] 2/2 " in text
    assert "batch: nvfp4_gemm test" in stdout and "[batch]" not in stdout


def test_ctrl_c_stops_every_evaluation_and_keeps_the_rows(tmp_path):
    """SIGINT to `batch` while evaluations run: one line, exit 130, the rows written so far stay, and no
    eval.py run of the batch outlives it."""
    folder = tmp_path / "subs"
    folder.mkdir()
    shutil.copy(os.path.join(ROOT, "submissions", "torch_reference.py"), folder / "a_fast.py")
    for number in range(3):
        with open(folder / f"slow_{number}.py", "w") as f:
            f.write(open(os.path.join(ROOT, "tests", "batch", "slow_honest.py")).read() + f"\n# {number}\n")
    jsonl = tmp_path / "rows.jsonl"
    environment = {k: v for k, v in os.environ.items() if not k.startswith("POPCORN_")}
    proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "eval.py"), "batch", str(folder), "--spec",
                             spec_file(ONE), "--jsonl", str(jsonl)], cwd=ROOT, env=environment,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=as_from_a_terminal)
    deadline = time.time() + 180
    while time.time() < deadline and not (jsonl.exists() and jsonl.read_text().strip() and _an_eval_of("slow_")):
        time.sleep(0.2)
    assert _an_eval_of("slow_"), "no slow evaluation started"
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr[-2000:]
    assert "error: interrupted: every evaluation was stopped" in stderr
    assert len(read_jsonl(jsonl)) >= 1
    time.sleep(2)
    assert not _an_eval_of("slow_"), "an eval.py run of the batch lived on"


def test_without_address_a_new_local_instance_starts_whatever_ray_address_says(tmp_path):
    """Ray's own default would join RAY_ADDRESS (or the last `ray start` cluster); batch without --address
    always starts its own instance on this machine."""
    jsonl = tmp_path / "rows.jsonl"
    done = run_batch("submissions/torch_reference.py", "--spec", spec_file(ONE), "--jsonl", str(jsonl),
                     env={"RAY_ADDRESS": "127.0.0.1:1"})
    assert done.returncode == 0, done.stderr[-2000:]
    row, = read_jsonl(jsonl)
    assert row["passed"]


def test_two_evaluations_on_one_machine_never_share_a_core(tmp_path):
    """Each evaluation of a batch claims a block of cores with a lock held for its lifetime; a third claim on a
    two-slot machine finds none free until one ends (real processes, real locks)."""
    code = ("import sys, time; sys.path.insert(0, {root!r}); from arena.batch.jobs import claim_cores\n"
            "claim = claim_cores(2); print(sorted(claim[0]) if claim else None, flush=True); time.sleep(3)\n")
    holders = [subprocess.Popen([sys.executable, "-c", code.format(root=ROOT)], stdout=subprocess.PIPE, text=True)
               for _ in range(2)]
    first, second = (json.loads(p.stdout.readline()) for p in holders)
    from arena.batch.jobs import claim_cores, release_cores
    third = claim_cores(2)
    for p in holders:
        p.wait()
    assert first and second and not set(first) & set(second), (first, second)
    assert third is None, third
    again = claim_cores(2)
    assert again is not None
    release_cores(again[1])


def test_an_evaluation_cannot_widen_its_cores_past_its_cpuset():
    """A child that asks for every core with sched_setaffinity keeps only its claimed ones inside the cpuset
    (affinity alone let a red team's submission take the whole machine)."""
    from arena.isolation.cpuset import Cpuset
    cores = {sorted(os.sched_getaffinity(0))[0]}
    fence, why = Cpuset.make(cores, f"nvfp4-arena-test-{os.getpid()}")
    if fence is None:
        pytest.skip(why)
    widen = "import os; os.sched_setaffinity(0, range(os.cpu_count())); print(sorted(os.sched_getaffinity(0)))"
    try:
        out = subprocess.run([sys.executable, "-c", widen], preexec_fn=fence.enter, capture_output=True, text=True,
                             timeout=60)
    finally:
        fence.remove()
    assert json.loads(out.stdout) == sorted(cores), (out.stdout, out.stderr[-500:])
    assert not os.path.exists(fence.folder)


def test_without_a_timeout_a_hang_costs_what_a_single_run_fits_to_the_case(tmp_path):
    """No --timeout: each evaluation fits its limit to the case as a single run does (30 s and a little for a
    small CPU case), not a flat 180 s."""
    folder = tmp_path / "one"
    folder.mkdir()
    shutil.copy(os.path.join(ROOT, "tests", "submissions", "hangs.py"), folder / "hangs.py")
    jsonl = tmp_path / "rows.jsonl"
    done = run_batch(str(folder), "--spec", spec_file(ONE), "--jsonl", str(jsonl))
    assert done.returncode == 112, done.stderr[-2000:]
    row = read_jsonl(jsonl)[0]
    limit = float(row["cases"][0]["error"].split("timed out after ")[1].split(" s")[0])
    assert limit < 60, row["cases"][0]["error"]


def test_a_manifest_names_each_files_expected_verdict_and_the_table_says_which_agree(tmp_path):
    """A manifest (tab-separated, relative paths from its folder): every good row evaluated, with its expected
    verdict beside its own; a row with an unknown verdict word is one error line and the rest goes on."""
    for path in ("submissions/torch_reference.py", "tests/broken/zeros.py", "tests/submissions/crashes.py",
                 "tests/broken/_kernel.py"):
        shutil.copy(os.path.join(ROOT, path), tmp_path / os.path.basename(path))
    (tmp_path / "one.txt").write_text(ONE)
    (tmp_path / "manifest.tsv").write_text(
        "file\tspec\texpected\tevidence\n"
        "torch_reference.py\tone.txt\tpass\tits author's log\n"
        "zeros.py\tone.txt\tpass\ta wrong claim\n"
        "crashes.py\tone.txt\tfail\t\n"
        "torch_reference.py\tone.txt\tmaybe\t\n")
    jsonl = tmp_path / "rows.jsonl"
    page = tmp_path / "rank.html"
    done = run_batch("--manifest", str(tmp_path / "manifest.tsv"), "--jsonl", str(jsonl), "--report", str(page))
    assert done.returncode == 112, done.stderr[-2000:]
    assert f"error: {tmp_path / 'manifest.tsv'}:5: expected 'maybe' is none of" in done.stderr, done.stderr
    rows = {os.path.basename(r["path"]): r for r in read_jsonl(jsonl)}
    assert {name: (r["passed"], r["expected"], r["agrees"]) for name, r in rows.items()} == {
        "torch_reference.py": (True, "pass", "yes"), "zeros.py": (False, "pass", "NO"),
        "crashes.py": (False, "fail", "yes")}
    assert "agreement with the manifest: 2 of 3 judged files (67 %)" in done.stdout, done.stdout
    assert "wall time: " in done.stdout
    html = page.read_text()
    assert "<th>agrees</th>" in html and "<td>pass</td><td>NO</td>" in html and "<th>wall s</th>" in html


def test_a_timed_batch_never_packs_evaluations_on_one_gpu():
    done = run_batch("submissions/torch_reference.py", "--mode", "benchmark", "--per-gpu", "2")
    assert done.returncode == 2
    assert done.stderr.strip() == ("error: --per-gpu 2: benchmark mode times each submission, and a timed run "
                                   "never shares its GPU"), done.stderr


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores")
def test_two_batches_on_different_cores_claim_their_own_cores_at_once():
    """Two batches started on different cores of one machine (taskset): each claims its own core at once
    (the locks are per core, not per block number)."""
    first, second = sorted(os.sched_getaffinity(0))[:2]
    code = ("import os, sys, time; sys.path.insert(0, {root!r}); os.sched_setaffinity(0, {{{core}}}); "
            "from arena.batch.jobs import claim_cores\n"
            "claim = claim_cores(1); print(sorted(claim[0]) if claim else None, flush=True); time.sleep(3)\n")
    holders = [subprocess.Popen([sys.executable, "-c", code.format(root=ROOT, core=core)], stdout=subprocess.PIPE,
                                text=True) for core in (first, second)]
    claims = [json.loads(p.stdout.readline()) for p in holders]
    for p in holders:
        p.wait()
    assert claims == [[first], [second]], claims


def test_a_manifest_row_with_a_missing_task_is_left_out_and_the_rest_is_evaluated(tmp_path):
    shutil.copy(os.path.join(ROOT, "submissions", "torch_reference.py"), tmp_path / "torch_reference.py")
    shutil.copy(os.path.join(ROOT, "submissions", "torch_reference.py"), tmp_path / "elsewhere.py")
    (tmp_path / "one.txt").write_text(ONE)
    (tmp_path / "manifest.tsv").write_text("file\ttask\tspec\n"
                                           "torch_reference.py\t\tone.txt\n"
                                           "elsewhere.py\tno_such_task\tone.txt\n")
    jsonl = tmp_path / "rows.jsonl"
    done = run_batch("--manifest", str(tmp_path / "manifest.tsv"), "--jsonl", str(jsonl))
    assert done.returncode == 112, done.stderr[-2000:]
    assert f"error: no task folder {tmp_path / 'no_such_task'} (--task takes a folder holding task.yml)" \
        in done.stderr, done.stderr
    assert f"error: {tmp_path / 'elsewhere.py'}: left out (its task or spec file above)" in done.stderr
    row, = read_jsonl(jsonl)
    assert row["passed"] and row["path"].endswith("torch_reference.py"), row
