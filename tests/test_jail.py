"""The jail's promises (docs/integrity.md, "The sandbox"), each tried by an adversarial look-alike run through
eval.py as a real subprocess: what a submission can see and touch, code at interpreter start, links left in its
home, outputs larger than their storage, markup in its text, a hijacked channel with forged times, shell commands
smuggled into build flags, and a machine without bubblewrap."""
import os
import shutil
import sys
import tempfile

import pytest

from arena.isolation import bubblewrap
from tests.evalrun import ROOT, run_eval, spec_file

ONE = "m: 128; n: 256; k: 256; l: 1; seed: 1111\n"
FAST = ("--max-runs", "8", "--max-time", "2")
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or bubblewrap.find_bwrap() is None,
                                reason="the jail needs Linux and bubblewrap (apt-get install bubblewrap)")


def exploit(name: str) -> str:
    return os.path.join(ROOT, "tests", "exploits", f"{name}.py")


def facts(folder: str, name: str) -> dict:
    path = os.path.join(folder, name)
    lines = open(path).read().splitlines() if os.path.exists(path) else []
    return dict(line.split(": ", 1) for line in lines if ": " in line)


@pytest.fixture(scope="module")
def one():
    return spec_file(ONE)


def test_a_probe_sees_no_host_process_opens_no_device_and_starts_isolated(one, exploit_dir):
    mark = os.path.join("/dev/shm", f"arena-host-mark-{os.getpid()}")
    open(mark, "w").close()
    if os.path.exists("/dev/shm/arena-jail-note"):      # left by an unjailed run of the probe
        os.unlink("/dev/shm/arena-jail-note")
    try:
        run = run_eval("test", one, "--submission", exploit("jail_probe"),
                       env={"EXPLOIT_DIR": exploit_dir, "EXPLOIT_HOST_PID": str(os.getpid()),
                            "EXPLOIT_SHM_MARK": mark})
    finally:
        os.unlink(mark)
    seen = facts(exploit_dir, "jail")
    assert run.code == 0, run.stderr[-1500:]
    assert seen["signal host"] == "no such process" and seen["see host"] == "no", seen
    assert int(seen["processes visible"]) <= 3, seen          # the jail's init, the worker, maybe a helper
    allowed = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx"}
    writable = seen["writable devices"].split()
    assert not [d for d in writable if d not in allowed and not d.startswith(("/dev/nvidia", "/dev/pts/"))], seen
    assert seen["block devices"] == "0", seen
    assert seen["host shm mark"] == "absent", seen
    assert not os.path.exists("/dev/shm/arena-jail-note"), "the jail's note reached the host's /dev/shm"
    assert seen["user site"] == "False isolated: 1", seen
    assert seen["checkout writable"].startswith("no"), seen
    assert seen["terminal"] == "none", seen
    if os.geteuid() == 0:
        assert int(seen["uid"]) >= bubblewrap.UID_BASE, seen
    # A second run (another jail, the same file) finds nothing the first left in its /dev/shm.
    run_eval("test", one, "--submission", exploit("jail_probe"), env={"EXPLOIT_DIR": exploit_dir})
    assert [line for line in open(os.path.join(exploit_dir, "jail")) if "earlier note" in line] == \
        ["earlier note: absent\n"] * 2


def test_a_pth_file_planted_in_the_home_never_runs(one, exploit_dir):
    for _ in range(2):                 # the first run plants it, the second would run it at interpreter start
        run = run_eval("test", one, "--submission", exploit("pth_in_home"), env={"EXPLOIT_DIR": exploit_dir})
        assert run.code == 0, run.stderr[-1500:]
    assert any("planted in" in line for line in open(os.path.join(exploit_dir, "pth")))
    assert not os.path.exists(os.path.join(exploit_dir, "pth_ran")), "the .pth ran"


def test_links_left_in_the_home_are_never_followed(one, exploit_dir):
    target = tempfile.mkdtemp(dir="/var/tmp" if os.path.isdir("/var/tmp") else None)
    os.chmod(target, 0o700)
    try:
        for _ in range(2):             # the second run starts with the links in place
            run = run_eval("test", one, "--submission", exploit("home_symlink"),
                           env={"EXPLOIT_DIR": exploit_dir, "EXPLOIT_LINK_TARGET": target})
            assert run.code == 0, run.stderr[-1500:]
        assert any("->" in line for line in open(os.path.join(exploit_dir, "links")))
        assert os.stat(target).st_mode & 0o777 == 0o700 and os.listdir(target) == []
    finally:
        shutil.rmtree(target, ignore_errors=True)


def test_an_output_larger_than_its_storage_is_refused_before_any_copy(one):
    run = run_eval("test", one, "--submission", exploit("stride0_output"), popcorn=True, timeout=120)
    assert run.code == 112 and run.keys["check"] == "fail", (run.raw, run.stderr[-1500:])
    assert "overlap in memory" in run.keys["test.0.error"], run.keys


@pytest.mark.parametrize("mode", ["test", "diagnose"])
def test_markup_in_worker_text_is_printed_as_text(one, mode):
    run = run_eval(mode, one, "--submission", exploit("markup_text"))
    assert run.code == 112, run.stderr[-1500:]
    assert "MarkupError" not in run.stdout + run.stderr
    assert "[bold green]✔ test 0 passed[/bold green]" in run.stdout.replace("\n", ""), run.stdout[-3000:]


def test_html_in_worker_text_reaches_the_html_report_as_text(one, tmp_path):
    report = tmp_path / "report.html"
    run = run_eval("test", one, "--submission", exploit("html_text"), "--report", str(report), "--quiet")
    assert run.code == 112, run.stderr[-1500:]
    page = report.read_text()
    assert "&lt;script&gt;document.getElementById" in page, page[-3000:]
    assert "<script>document" not in page and "<img src=x" not in page and "<h1>PASS" not in page
    assert page.count("<section") == page.count("</section>") == 1


def test_forged_times_on_a_hijacked_channel_fail_the_ranked_run(one, exploit_dir):
    run = run_eval("leaderboard", one, "--submission", exploit("channel_hijack"), *FAST, popcorn=True,
                   env={"EXPLOIT_DIR": exploit_dir})
    assert os.path.exists(os.path.join(exploit_dir, "hijack")), "the exploit forged nothing"
    assert run.code == 112 and run.keys["check"] == "fail", (run.raw, run.stderr[-1500:])
    assert "timing cannot be trusted" in run.keys["benchmark.0.error"], run.keys
    assert "own clock" in run.keys["benchmark.0.error"], run.keys


def test_forged_times_are_marked_untrusted_in_a_benchmark(one, exploit_dir):
    run = run_eval("benchmark", one, "--submission", exploit("channel_hijack"), *FAST, popcorn=True,
                   json_report=True, env={"EXPLOIT_DIR": exploit_dir})
    assert "own clock" in run.keys.get("benchmark.0.untrusted", ""), run.raw
    assert "own clock" in run.doc["cases"][0]["untrusted"]
    shown = run_eval("benchmark", one, "--submission", exploit("channel_hijack"), *FAST,
                     env={"EXPLOIT_DIR": exploit_dir})
    assert "untrusted" in shown.stdout and "own clock" in shown.stdout.replace("\n", " "), shown.stdout[-2000:]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_a_shell_command_in_build_flags_runs_only_inside_the_jail(tmp_path):
    marker = os.path.join("/var/tmp", f"arena-build-flag-{os.getpid()}")
    source = tmp_path / "flags.py"
    source.write_text(
        "from torch.utils.cpp_extension import load_inline\n"
        "CUDA_SRC = '__global__ void k(float* x) { x[0] = 1.0f; }\\n'\n"
        "mod = load_inline(name='flags', cpp_sources='', cuda_sources=CUDA_SRC,\n"
        f"                  extra_cuda_cflags=['-DX=$(touch {marker})'])\n"
        "def custom_kernel(data):\n    return data[-1]\n")
    run = run_eval("compile", "--submission", str(source), "--arch", "sm_90a", timeout=600)
    assert "built" in run.stdout or "failed" in run.stdout, run.stdout + run.stderr[-1500:]
    assert not os.path.exists(marker), "a build flag ran a command outside the jail"


def test_without_bubblewrap_every_mode_says_so_and_leaderboard_refuses(one, tmp_path):
    env = {"ARENA_BWRAP": str(tmp_path / "no-bwrap")}
    run = run_eval("test", one, "--submission", os.path.join(ROOT, "submissions", "torch_reference.py"), env=env)
    assert run.code == 0 and "bubblewrap (bwrap) not found" in run.stdout + run.stderr, run.stdout[-1500:]
    ranked = run_eval("leaderboard", one, "--submission", os.path.join(ROOT, "submissions", "torch_reference.py"),
                      *FAST, popcorn=True, env=env)
    assert ranked.code == 112 and "not ranked" in ranked.stdout + ranked.stderr, (ranked.raw, ranked.stderr[-800:])


def test_a_neighbour_evaluation_can_neither_see_nor_signal_another(one, exploit_dir):
    """Two evaluations at once, as a batch runs them: the neighbour looks for every process it can reach."""
    import subprocess
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("POPCORN_")}, "EXPLOIT_DIR": exploit_dir}
    other = subprocess.Popen([sys.executable, os.path.join(ROOT, "eval.py"), "test", one, "--submission",
                              os.path.join(ROOT, "tests", "batch", "slow_honest.py")], cwd=ROOT, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        run = run_eval("test", one, "--submission", exploit("batch_neighbour"), env={"EXPLOIT_DIR": exploit_dir})
        assert other.poll() is None, "the other evaluation ended before its neighbour looked"
    finally:
        other.kill()
        other.wait()
    assert run.code == 0, run.stderr[-1500:]
    assert [line.strip() for line in open(os.path.join(exploit_dir, "neighbour"))] == ["reached 0"]


@pytest.mark.skipif(os.geteuid() != 0, reason="only root runs the jail under a uid of its own")
def test_the_jails_own_user_can_be_looked_up(one):
    run = run_eval("test", one, "--submission", os.path.join(ROOT, "tests", "submissions", "looks_up_its_user.py"))
    assert run.code == 0, (run.stdout[-1500:], run.stderr[-1500:])
    assert "getpwuid" not in run.stdout + run.stderr


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="the jail has a uid of its own only as root")
def test_a_submission_in_a_private_folder_runs_from_a_copy_no_other_user_can_read(one, tmp_path):
    """A runner's work folder is private (0700): the jail gets a copy owned by its own uid, and nothing in that
    copy is readable by group or others (another evaluation of a batch read such a copy before)."""
    private = tmp_path / "work"
    private.mkdir(mode=0o700)
    shutil.copy(os.path.join(ROOT, "submissions", "torch_reference.py"), private / "submission.py")
    os.chmod(private, 0o700)
    run = run_eval("test", one, "--submission", str(private / "submission.py"))
    assert run.code == 0, run.stderr[-1500:]
    base = os.path.join(tempfile.gettempdir(), "nvfp4-arena-copies")
    assert os.stat(base).st_mode & 0o777 == 0o711
    copies = [os.path.join(base, name) for name in os.listdir(base)]
    mine = [c for c in copies if os.path.exists(os.path.join(c, "submission.py"))
            and open(os.path.join(c, "submission.py")).read() == (private / "submission.py").read_text()]
    assert mine, copies
    for folder, folders, files in os.walk(mine[0]):
        for name in [folder] + [os.path.join(folder, f) for f in folders + files]:
            assert os.lstat(name).st_mode & 0o077 == 0, (name, oct(os.lstat(name).st_mode))


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="widening needs a second core to take")
def test_a_submission_cannot_widen_the_cores_it_was_started_on(one, exploit_dir):
    """eval.py started on one core (as a batch starts each evaluation on its block): the submission asks for
    every core, by the system call and by `taskset`, and keeps the one (a red team's submission took every
    core of its batch's host this way)."""
    mine = os.sched_getaffinity(0)
    first = min(mine)
    os.sched_setaffinity(0, {first})          # eval.py and its worker inherit it
    try:
        run = run_eval("test", one, "--submission", exploit("widen_cores"), env={"EXPLOIT_DIR": exploit_dir})
    finally:
        os.sched_setaffinity(0, mine)
    seen = facts(exploit_dir, "cores")
    assert run.code == 0, run.stderr[-1500:]
    assert seen["before"] == f"[{first}]", seen
    assert seen["sched_setaffinity"].startswith("refused"), seen
    assert seen["taskset"] == "refused", seen
    assert seen["after"] == f"[{first}]", seen


@pytest.mark.slow       # g++ builds torch's extension header twice: about 90 s
@pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None, reason="no C++ compiler")
def test_a_build_killed_midway_does_not_hang_the_next_run_of_the_file(one, tmp_path):
    """A run killed while torch builds a load_inline extension (Ctrl-C, a timeout, SIGKILL) leaves torch's lock
    file in the home the file's next run reuses, and torch waits for that file for ever. The next run, alone
    with the home, clears it: the build runs and its error is named."""
    import hashlib
    import signal
    import subprocess
    import time
    import uuid
    text = open(os.path.join(ROOT, "tests", "submissions", "extension_syntax_error.py")).read()
    source = tmp_path / "killed_build.py"
    source.write_text(f"{text}# {uuid.uuid4().hex}\n")      # a home of its own
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:24]
    lock = os.path.join(tempfile.gettempdir(), "nvfp4-arena-homes", digest, "cache", "torch_extensions",
                        "passthrough_ext", "lock")
    first = subprocess.Popen([sys.executable, os.path.join(ROOT, "eval.py"), "test", one, "--submission",
                              str(source)], cwd=ROOT, start_new_session=True, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not os.path.exists(lock) and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    assert os.path.exists(lock), "the first run never started its build"
    run = run_eval("test", one, "--submission", str(source), popcorn=True, timeout=200, check_timeout=False)
    assert run.code == 112, (run.code, run.stderr[-1500:])
    assert "extension 'passthrough_ext' does not build: main.cpp:5" in run.keys["test.0.error"]
