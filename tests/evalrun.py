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


GOOD = os.path.join(ROOT, "submissions", "torch_reference.py")
