"""Run eval.py as a real subprocess, standalone or through a real POPCORN_FD pipe."""
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMALL = "m: 128; n: 256; k: 256; l: 1; seed: 1111\nm: 128; n: 512; k: 512; l: 1; seed: 7\n"


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    keys: dict          # POPCORN_FD lines parsed as the runner does (first colon; later duplicates win)
    raw: str


def spec_file(text: str) -> str:
    f = tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False)
    f.write(text)
    f.close()
    return f.name


def run_eval(*args, popcorn=False, env=None, timeout=300, cwd=ROOT) -> Run:
    environment = {k: v for k, v in os.environ.items() if k not in ("POPCORN_FD", "POPCORN_SEED")}
    environment.update(env or {})
    pass_fds, read_end = (), None
    if popcorn:
        read_end, write_end = os.pipe()
        environment["POPCORN_FD"] = str(write_end)
        pass_fds = (write_end,)
    proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "eval.py"), *args], cwd=cwd, env=environment,
                            pass_fds=pass_fds, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    raw = ""
    if popcorn:
        os.close(write_end)
        with os.fdopen(read_end) as pipe:
            raw = pipe.read()
    stdout, stderr = proc.communicate(timeout=timeout)
    keys = {}
    for line in raw.splitlines():
        key, _, value = line.partition(":")
        keys[key.strip()] = value.strip()
    return Run(proc.returncode, stdout, stderr, keys, raw)


def submission(name: str) -> str:
    return os.path.join(ROOT, "tests", "submissions", name)


GOOD = os.path.join(ROOT, "submissions", "torch_reference.py")
