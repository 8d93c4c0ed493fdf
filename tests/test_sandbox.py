"""The sandbox holds: one adversarial submission per class of escape, each run through eval.py as a
real subprocess, through a real POPCORN_FD pipe where the verdict is under test. Every one of these won
against the multiprocessing-based worker this sandbox replaced (docs/integrity.md)."""
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

from tests.evalrun import GOOD, ROOT, as_from_a_terminal, run_eval, spec_file

ONE = "m: 128; n: 256; k: 256; l: 1; seed: 1111\n"
FAST = ("--max-runs", "8", "--max-time", "2")
SECRET = "987654321"
pytestmark = [pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandbox is Linux-only"),
              pytest.mark.slow]     # real evaluations under the sandbox: `pytest -m slow`


def exploit(name: str) -> str:
    return os.path.join(ROOT, "tests", "exploits", f"{name}.py")


def read_log(folder, name: str) -> list[str]:
    path = os.path.join(folder, name)
    return open(path).read().splitlines() if os.path.exists(path) else []


@pytest.fixture(scope="module")
def one():
    return spec_file(ONE)


def jail_processes(submission: str) -> list[int]:
    """Host pids running as the jail's own uid for `submission` (its worker and whatever it started)."""
    from arena.isolation import bubblewrap
    uid = bubblewrap.jail_uid(hashlib.sha256(open(submission, "rb").read()).hexdigest()[:24])
    found = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and os.stat(f"/proc/{entry}").st_uid == uid:
                found.append(int(entry))
        except OSError:
            pass
    return found


def copy_of_the_evaluator(where) -> str:
    """A private copy of the evaluator's files, for exploits that try to rewrite them."""
    root = os.path.join(str(where), "arena-copy")
    ignore = shutil.ignore_patterns("__pycache__", ".git", "*.pyc", ".pytest_cache")
    for name in ("arena", "submissions", "tasks", "tests"):
        shutil.copytree(os.path.join(ROOT, name), os.path.join(root, name), ignore=ignore)
    for name in os.listdir(ROOT):
        if name.endswith((".py", ".yml")):
            shutil.copy(os.path.join(ROOT, name), root)
    os.chmod(str(where), 0o755)
    return root


def tree_digest(folder: str) -> str:
    digest = hashlib.sha256()
    for base, _, files in sorted(os.walk(folder)):
        for name in sorted(files):
            if name.endswith(".py"):
                digest.update(open(os.path.join(base, name), "rb").read())
    return digest.hexdigest()


def run_copy(root, *args, env=None, popcorn=True, timeout=300):
    environment = {k: v for k, v in os.environ.items() if k not in ("POPCORN_FD", "POPCORN_SEED")}
    environment.update(env or {})
    read_end, write_end = os.pipe()
    environment["POPCORN_FD"] = str(write_end)
    proc = subprocess.Popen([sys.executable, os.path.join(root, "eval.py"), *args], cwd=root, env=environment,
                            pass_fds=(write_end,), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        raw = pipe.read()
    stdout, stderr = proc.communicate(timeout=timeout)
    keys = dict(line.split(": ", 1) for line in raw.splitlines() if ": " in line)
    return proc.returncode, keys, stderr


# ---- 1. no channel from the worker that the parent unpickles ------------------------------------------------

def test_multiprocessing_authkey_and_resource_sharer_give_no_code_execution_in_the_parent(one, exploit_dir):
    run = run_eval("test", one, "--submission", exploit("mp_resource_sharer"), popcorn=True,
                   env={"EXPLOIT_DIR": exploit_dir})
    assert not os.path.exists(os.path.join(exploit_dir, "parent_pwned")), read_log(exploit_dir, "mp")
    assert run.code == 112 and run.keys["check"] == "fail", run.raw
    assert "returned the input c unchanged" in run.keys["test.0.error"]


# ---- 2. the parent runs no code from disk once the worker exists ---------------------------------------------

def test_files_the_parent_would_import_later_cannot_be_planted(tmp_path, exploit_dir):
    root = copy_of_the_evaluator(tmp_path)
    before = tree_digest(root)
    code, keys, stderr = run_copy(root, "test", spec_file(ONE), "--submission",
                                  os.path.join(root, "tests", "exploits", "parent_lazy_import.py"),
                                  env={"EXPLOIT_DIR": exploit_dir})
    assert not os.path.exists(os.path.join(exploit_dir, "parent_pwned")), read_log(exploit_dir, "lazy")
    assert code == 112 and keys["check"] == "fail", (keys, stderr[-2000:])
    assert tree_digest(root) == before
    assert all("wrote" not in line for line in read_log(exploit_dir, "lazy") if "/arena/" in line)


@pytest.mark.parametrize("mode,submission", [("test", GOOD), ("test", exploit("out_fp32")),
                                             ("benchmark", GOOD), ("diagnose", exploit("out_untouched_c")),
                                             ("test", os.path.join(ROOT, "tests", "submissions", "crashes.py")),
                                             ("test --report", exploit("out_fp32"))])
def test_the_parent_imports_no_module_once_submission_code_may_run(one, tmp_path, mode, submission):
    """Every mode, and the HTML report (its templates compile before the worker starts)."""
    audit = str(tmp_path / "late_imports")
    mode, *report = mode.split()
    args = (mode, one, "--submission", submission) + (FAST if mode == "benchmark" else ()) + \
        ((report[0], str(tmp_path / "report.html")) if report else ())
    run_eval(*args, env={"ARENA_IMPORT_AUDIT": audit}, popcorn=mode != "diagnose")
    late = open(audit).read().split()
    assert late == ["worker-started"], late


# ---- 3. no work hidden in serialization -------------------------------------------------------------------

def test_an_output_that_computes_itself_when_serialized_is_refused(one):
    run = run_eval("benchmark", one, "--submission", exploit("reduce_hidden_work"), *FAST, popcorn=True)
    assert run.code == 112 and run.keys["check"] == "fail", run.raw
    assert "not a plain torch.Tensor" in run.keys["benchmark.0.error"], run.keys


# ---- 4. timing code bent in place --------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["patch_timing_globals", "patch_timing_code"])
def test_timing_code_bent_in_place_is_caught(one, name):
    run = run_eval("benchmark", one, "--submission", exploit(name), *FAST, popcorn=True)
    assert run.code == 112 and run.keys["check"] == "fail", (run.raw, run.stderr[-2000:])
    error = run.keys["benchmark.0.error"]
    assert "replaced harness" in error or "the evaluator's own clock" in error, error


# ---- 5. timed and untimed calls never share a request --------------------------------------------------------

def test_work_deferred_to_untimed_calls_fails_the_ranked_run(one):
    run = run_eval("leaderboard", one, "--submission", exploit("deferred_to_untimed"), *FAST, popcorn=True)
    assert run.code == 112 and run.keys["check"] == "fail", (run.raw, run.stderr[-2000:])


# ---- 6. no survivors ---------------------------------------------------------------------------------------

def test_a_deep_chain_of_session_leaders_does_not_outlive_the_evaluator(one, exploit_dir, tmp_path):
    json_path = str(tmp_path / "result.json")
    run = run_eval("test", one, "--submission", exploit("survivor_chain"), "--json", json_path,
                   env={"EXPLOIT_DIR": exploit_dir})
    written = open(json_path).read()
    assert read_log(exploit_dir, "survivor"), "the chain never started"
    time.sleep(6)
    assert not any("still alive" in line for line in read_log(exploit_dir, "survivor"))
    assert open(json_path).read() == written and run.code == 0, run.stderr[-2000:]


@pytest.mark.skipif(os.geteuid() != 0, reason="the jail's own uid (how the host sees the worker) needs root")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGKILL])
def test_a_signal_to_the_evaluator_leaves_no_worker_running(one, exploit_dir, signum):
    environment = {k: v for k, v in os.environ.items() if k not in ("POPCORN_FD", "POPCORN_SEED")}
    environment["EXPLOIT_DIR"] = exploit_dir
    proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "eval.py"), "test", one, "--submission",
                             exploit("busy_forever")], cwd=ROOT, env=environment, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, preexec_fn=as_from_a_terminal)
    deadline = time.time() + 120
    while not read_log(exploit_dir, "busy") and time.time() < deadline:
        time.sleep(0.2)
    assert jail_processes(exploit("busy_forever")), "the worker is not visible to the host"
    proc.send_signal(signum)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode in (128 + signum, -signum, 1), (proc.returncode, stderr[-1500:])
    time.sleep(0.5)
    assert not jail_processes(exploit("busy_forever")), f"worker still running after {signum.name}"


# ---- 7. no run weakens the next ----------------------------------------------------------------------------

@pytest.mark.skipif(os.geteuid() != 0, reason="the capability drop and the worker's own user need root")
def test_a_run_cannot_switch_the_sandbox_off_for_the_next(one, exploit_dir, tmp_path):
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmp.mkdir(mode=0o1777)
    tmp.chmod(0o1777)
    env = {"EXPLOIT_DIR": exploit_dir, "HOME": str(home), "TMPDIR": str(tmp)}
    env = {**env, "TORCH_EXTENSIONS_DIR": "", "TRITON_CACHE_DIR": ""}
    first = run_eval("test", one, "--submission", exploit("cache_chmod"), env=env)
    second = run_eval("test", one, "--submission", exploit("seed_leak"), popcorn=True,
                      env={**env, "POPCORN_SEED": SECRET})
    assert second.code == 0, (first.stderr[-1500:], second.raw, second.stderr[-1500:])
    assert "isolation off" not in second.stderr and "hardening off" not in second.stderr, second.stderr
    probe = read_log(exploit_dir, "seed_probe")
    assert not any(SECRET in line for line in probe)
    assert any("/environ: denied" in line and "self" not in line for line in probe), probe


# ---- 8. the seed stays secret ------------------------------------------------------------------------------

def test_a_seed_given_on_the_command_line_is_not_in_any_argv_the_worker_can_read(one, exploit_dir):
    run = run_eval("test", one, "--submission", exploit("argv_seed_leak"), "--seed", SECRET,
                   env={"EXPLOIT_DIR": exploit_dir})
    seen = read_log(exploit_dir, "argv")
    assert run.code == 0 and seen, run.stderr[-1500:]
    assert not any(SECRET in line for line in seen), seen


# ---- 9. worker text is data, not terminal control ----------------------------------------------------------

def test_worker_text_reaches_the_report_capped_and_without_control_characters(one):
    run = run_eval("test", one, "--submission", exploit("terminal_forge"))
    assert run.code == 112
    text = run.stdout + run.stderr
    assert "\x1b" not in text and "\x07" not in text
    assert len(text) < 400_000, len(text)
    assert "boom" in text
    # The forged row is inert text inside the error, never a line of its own.
    assert not any(line.strip().startswith("✔ test 0 passed") for line in text.splitlines())


# ---- 9. no service of the host is reachable -----------------------------------------------------------------

class Listener:
    """A server of the host's (the test's own): records every byte any client sends it."""

    def __init__(self, family, address):
        import threading
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.bind(address)
        self.sock.listen(8)
        self.received = b""
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.settimeout(5)
            try:
                self.received += conn.recv(4096)
            except OSError:
                pass
            conn.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="the worker's own network and socket view need root")
def test_the_worker_reaches_no_listening_socket_of_the_host(one, exploit_dir, tmp_path):
    tcp = Listener(socket.AF_INET, ("127.0.0.1", 0))
    # Outside /tmp (the jail has its own): the jail sees this folder through its read-only view of the host.
    visible = tempfile.mkdtemp(dir="/var/tmp" if os.path.isdir("/var/tmp") else None)
    os.chmod(visible, 0o755)
    unix_path = os.path.join(visible, "service.sock")
    unix = Listener(socket.AF_UNIX, unix_path)
    os.chmod(unix_path, 0o777)
    abstract_name = f"arena-test-{os.getpid()}"
    abstract = Listener(socket.AF_UNIX, "\0" + abstract_name)
    targets = os.path.join(exploit_dir, "targets")
    with open(targets, "w") as f:
        f.write(f"tcp 127.0.0.1 {tcp.sock.getsockname()[1]}\nunix {unix_path}\nabstract {abstract_name}\n")
    run = run_eval("test", one, "--submission", exploit("host_sockets"),
                   env={"EXPLOIT_DIR": exploit_dir, "EXPLOIT_TARGETS": targets})
    assert run.code == 0, run.stderr[-1500:]
    tried = read_log(exploit_dir, "sockets")
    assert len(tried) == 3, tried
    time.sleep(0.5)
    assert (tcp.received, unix.received, abstract.received) == (b"", b"", b""), tried
    assert not any(line.endswith(": reached") for line in tried), tried
