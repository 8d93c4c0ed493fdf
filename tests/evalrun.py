"""Run eval.py as a real subprocess, standalone or through a real POPCORN_FD pipe: the one runner of the
tests and the bench scripts."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMALL = "m: 128; n: 256; k: 256; l: 1; seed: 1111\nm: 128; n: 512; k: 512; l: 1; seed: 7\n"


@dataclass
class Run:
    code: int | None    # None: killed at the timeout
    stdout: str
    stderr: str
    keys: dict          # POPCORN_FD lines parsed as the runner does (first colon; later duplicates win)
    raw: str
    seconds: float = 0.0
    doc: dict | None = None     # the --json report, with json_report=True (None if none was written)


def as_from_a_terminal():
    """For preexec_fn: SIGINT as a terminal's Ctrl-C finds it. A test run started in the background of a
    non-interactive shell inherits SIGINT ignored, which Python (and so eval.py) keeps, as a background job
    should; the tests that send SIGINT model a user at a terminal."""
    import signal
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def spec_file(text: str) -> str:
    f = tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False)
    f.write(text)
    f.close()
    return f.name


def run_eval(*args, popcorn=False, env=None, timeout=300, cwd=ROOT, json_report=False,
             script=os.path.join(ROOT, "eval.py"), check_timeout=True) -> Run:
    """The one way tests and bench scripts run an evaluator: `script` (our eval.py, or the competition's) with
    `args`, in its own session; with `popcorn`, through a real POPCORN_FD pipe; with `json_report`, `--json FILE`
    added and read back. At `timeout` every process of the run is killed; that raises unless `check_timeout`
    is False, which returns code None instead."""
    environment = {k: v for k, v in os.environ.items() if k not in ("POPCORN_FD", "POPCORN_SEED")}
    environment.update(env or {})
    pass_fds, read_end = (), None
    report = None
    if json_report:
        report = tempfile.NamedTemporaryFile(suffix=".json", delete=False).name
        os.unlink(report)
        args = (*args, "--json", report)
    if popcorn:
        read_end, write_end = os.pipe()
        environment["POPCORN_FD"] = str(write_end)
        pass_fds = (write_end,)
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, script, *args], cwd=cwd, env=environment, pass_fds=pass_fds,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    raw = ""
    if popcorn:
        os.close(write_end)
        with os.fdopen(read_end) as pipe:
            raw = pipe.read()
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        if check_timeout:
            raise
        code = None
    keys = {}
    for line in raw.splitlines():
        key, _, value = line.partition(":")
        keys[key.strip()] = value.strip()
    doc = None
    if report and os.path.exists(report):
        with open(report) as f:
            doc = json.load(f)
        os.unlink(report)
    return Run(code, stdout, stderr, keys, raw, time.perf_counter() - started, doc)


def submission(name: str) -> str:
    return os.path.join(ROOT, "tests", "submissions", name)


def broken(name: str) -> str:
    """A planted-bug (or honest control) submission of tests/broken/, by name without .py."""
    return os.path.join(ROOT, "tests", "broken", f"{name}.py")


def run_on_terminal(argv: list[str], env: dict | None = None, timeout: float = 300) -> tuple[int, str, str]:
    """`python eval.py ARGV...` with stderr a real pseudo-terminal (stdout a pipe): (exit code, everything
    the terminal received, stdout)."""
    import pty
    import select
    master, slave = pty.openpty()
    environment = {**{k: v for k, v in os.environ.items() if not k.startswith("POPCORN_")},
                   "COLUMNS": "160", "TERM": "xterm", **(env or {})}
    process = subprocess.Popen([sys.executable, os.path.join(ROOT, "eval.py"), *argv], cwd=ROOT,
                               env=environment, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    seen, deadline = b"", time.time() + timeout
    while time.time() < deadline:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        elif process.poll() is not None:
            break
    stdout = process.communicate(timeout=60)[0].decode()
    os.close(master)
    return process.returncode, seen.decode(errors="replace"), stdout


GOOD = os.path.join(ROOT, "submissions", "torch_reference.py")
