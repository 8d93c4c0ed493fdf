"""`eval.py batch`: many submissions, each through a whole `eval.py` run of its own (the same isolation, checks
and timing as a single run: this module never evaluates anything itself), fanned out on Ray.

- One evaluation per GPU at a time (a Ray task asks for one GPU, so Ray sets CUDA_VISIBLE_DEVICES to it); on a
  machine or cluster without GPUs, one evaluation per core.
- Results stream to a JSONL file, one row per submission; a row already there for the same content, task, mode
  and cases is not evaluated again (`row_key`).
- A crashed, hung or cheating submission is a failed row: its `eval.py` run ends it. If the evaluating process
  or its node is lost, Ray runs the evaluation again elsewhere (`max_retries`); `attempts` in the row counts runs.

The driver side (`run_batch`) imports Ray only when it starts; `evaluate_one` is what runs on a Ray worker.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

from arena.isolation.cpuset import Cpuset
from arena.isolation.processes import die_with_parent
from arena.report.exit_codes import EXIT_NOT_RUN

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EVALUATED_CODES = (0, 112, 114)     # eval.py's verdicts: passed, failed, not run here (needs a GPU this
                                    # machine lacks); anything else is no verdict
FITTED_TIMEOUT_BOUND_S = 600.0      # a case's requests under eval.py's fitted timeout, at most (for the deadline)
RETRIES = 3                         # runs of one evaluation after the first, when its process or node is lost
RAY_INSTALL = "python3 -m pip install 'ray>=2.9'"
# A manifest's `expected` words, as passed (True) or failed (False); a build failure is a failed evaluation
EXPECTED_WORDS = {"pass": True, "passed": True, "fail": False, "failed": False, "build_fail": False}


@dataclass
class Submission:
    path: str                       # as found (shown and stored)
    source: bytes
    sha256: str
    also: list = field(default_factory=list)     # other paths with the same content: one evaluation, a row each
    expected: str = ""              # the verdict a manifest expects ("pass" / "fail"; "" when none is given)


@dataclass
class BatchPlan:
    task_dir: str                   # the task folder, relative to ROOT where it lies inside (for cluster nodes)
    task_name: str
    mode: str
    spec_text: str | None           # the --spec file's text, or None for the task's own cases
    cases_id: str                   # which cases: "tests" / "benchmarks" or "spec:<sha256 prefix>"
    case_count: int
    timeout: float | None           # seconds per request, as eval.py --timeout (None: fitted to each case)
    emulate_blackwell: bool = False     # eval.py --emulate-blackwell
    on_gpu: bool = False            # on a GPU (set by the driver once it sees the cluster)
    driver_omp_threads: str | None = None     # OMP_NUM_THREADS where `batch` was started (None: unset)
    slots: int = 1                  # evaluations at once on one machine (its GPUs, or its cores without one)


def find_submissions(paths: list[str]) -> tuple[list[Submission], list[str]]:
    """Every submission under `paths` (a file, or the *.py files of a folder, not those starting with "_",
    which are helpers), in order, identical contents merged; and one error line per path that is none."""
    found, errors, by_hash = [], [], {}
    for given in paths:
        if os.path.isdir(given):
            files = sorted(os.path.join(given, n) for n in os.listdir(given)
                           if n.endswith(".py") and not n.startswith("_")
                           and os.path.isfile(os.path.join(given, n)))
            if not files:
                errors.append(f"{given}: no submission (*.py) in this folder")
        elif os.path.isfile(given):
            files = [given]
        else:
            errors.append(f"{given}: no such file or folder")
            files = []
        for path in files:
            try:
                source = open(path, "rb").read()
            except OSError as error:
                errors.append(f"{path}: cannot read it: {error.strerror}")
                continue
            digest = hashlib.sha256(source).hexdigest()
            if digest in by_hash:
                by_hash[digest].also.append(path)
                continue
            by_hash[digest] = Submission(path, source, digest)
            found.append(by_hash[digest])
    return found, errors


@dataclass
class ManifestEntry:
    file: str                       # the submission (relative paths: from the manifest's folder)
    task: str                       # its task folder ("": the batch's --task)
    spec: str                       # its spec file ("": the batch's --spec, else the task's cases for the mode)
    expected: str                   # "pass" / "fail" / "build_fail" / "" (unknown)


def read_manifest(path: str) -> tuple[list[ManifestEntry], list[str]]:
    """The entries of a tab-separated manifest with a header line: `file` (required), and optionally `task`,
    `spec`, `expected`; other columns are ignored. Relative paths are from the manifest's folder. Also one
    error line per row that names no file or an unknown expected verdict (the row is left out)."""
    import csv
    folder = os.path.dirname(os.path.abspath(path))

    def at(value: str | None) -> str:
        """A path of the manifest, relative to its folder ("" stays "")."""
        value = (value or "").strip()
        return os.path.join(folder, value) if value and not os.path.isabs(value) else value
    entries, errors = [], []
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f, delimiter="\t")
            if "file" not in (reader.fieldnames or []):
                return [], [f"{path}: no `file` column in its header line (tab-separated: file, task, spec, "
                            "expected)"]
            for number, row in enumerate(reader, 2):
                name = (row.get("file") or "").strip()
                expected = (row.get("expected") or "").strip().lower()
                if not name:
                    errors.append(f"{path}:{number}: no file named; row left out")
                    continue
                if expected not in EXPECTED_WORDS and expected not in ("", "unknown"):
                    errors.append(f"{path}:{number}: expected {expected!r} is none of "
                                  f"{', '.join(EXPECTED_WORDS)}, unknown; row left out")
                    continue
                entries.append(ManifestEntry(at(name), at(row.get("task")), at(row.get("spec")),
                                             "" if expected == "unknown" else expected))
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        return [], [f"{path}: cannot read the manifest: {getattr(error, 'strerror', None) or error}"]
    return entries, errors


def row_identity(submission: Submission, plan: BatchPlan) -> dict:
    """What every row of this submission in this batch starts with; `row_key` of it finds earlier rows."""
    return {"path": submission.path, "sha256": submission.sha256, "task": plan.task_name, "mode": plan.mode,
            "cases_id": plan.cases_id, "emulated": plan.emulate_blackwell, "expected": submission.expected}


def row_key(row: dict) -> tuple:
    return row.get("sha256"), row.get("task"), row.get("mode"), row.get("cases_id"), bool(row.get("emulated"))


def agreement(row: dict) -> str:
    """How the row's verdict meets the manifest's expected one: "yes", "NO", or "" (nothing expected, no
    verdict, or not judged here: exit 114)."""
    expected = (row.get("expected") or "").lower()
    if expected not in EXPECTED_WORDS or not row.get("evaluated") or row.get("exit_code") == EXIT_NOT_RUN:
        return ""
    return "yes" if EXPECTED_WORDS[expected] == bool(row.get("passed")) else "NO"


def read_rows(jsonl: str) -> tuple[dict, list[str]]:
    """The rows of an earlier batch that hold a verdict, by `row_key`; and a line per unreadable row."""
    done, problems = {}, []
    if not os.path.exists(jsonl):
        return done, problems
    with open(jsonl) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError:
                problems.append(f"{jsonl}:{number}: not a JSON row; ignored")
                continue
            if isinstance(row, dict) and row.get("evaluated"):
                done[row_key(row)] = row
    return done, problems


# ---- on a Ray worker ---------------------------------------------------------------------------------------



def _stop(process: subprocess.Popen):
    """SIGTERM first (eval.py ends its worker and every descendant on it), SIGKILL after 15 s."""
    for signum, grace in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
        try:
            os.killpg(process.pid, signum)
        except ProcessLookupError:
            return
        try:
            process.wait(grace)
            return
        except subprocess.TimeoutExpired:
            continue


def _case_rows(doc: dict) -> list[dict]:
    rows = []
    for case in doc.get("cases", []):
        stats = case.get("stats") or {}
        rows.append({"index": case.get("index"), "spec": case.get("spec"), "passed": case.get("passed"),
                     "error": case.get("error") or "", "diagnosis": case.get("diagnosis") or "",
                     "mean_us": stats["mean"] / 1e3 if "mean" in stats else None,
                     "err_us": stats["err"] / 1e3 if "err" in stats else None, "runs": stats.get("runs"),
                     "timing": case.get("timing") or {}})
    return rows


def _last_error_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in reversed(lines):
        if line.startswith("error:"):
            return line[len("error:"):].strip()
    return lines[-1] if lines else ""


def claim_cores(slots: int) -> tuple[set[int], list[int]] | None:
    """A block of this machine's cores that no other evaluation on it holds (one of `slots` equal blocks of
    this process's cores), with the descriptors of its locks, one per core (held until closed: the claim ends
    with the process, however it ends). None when every block is taken. Ray counts CPUs but pins nothing:
    without this, two timed runs could share a core. The locks are per core, so two batches started on
    different cores of one machine never wait for each other, and overlapping ones never share a core."""
    cores = sorted(os.sched_getaffinity(0))
    per = max(1, len(cores) // max(1, slots))
    folder = os.path.join(tempfile.gettempdir(), "nvfp4-arena-cores")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    for block in range(max(1, len(cores) // per)):
        held = []
        for core in cores[block * per:(block + 1) * per]:
            fd = os.open(os.path.join(folder, f"core-{core}.lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                held.append(fd)
            except OSError:
                os.close(fd)
                break
        else:
            return set(cores[block * per:(block + 1) * per]), held
        release_cores(held)
    return None


def release_cores(fds: list[int]):
    for fd in fds:
        os.close(fd)


def evaluate_one(submission: Submission, plan: BatchPlan, counter=None) -> dict:
    """One whole `eval.py MODE` run of `submission`, as a single run would do it, in its own session; its
    JSON becomes the row. Runs where Ray places it (Ray has set CUDA_VISIBLE_DEVICES for its GPU)."""
    attempt = 1
    if counter is not None:
        import ray
        attempt = ray.get(counter.start.remote(submission.sha256))
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="arena-batch-") as scratch:
        path = submission.path
        if not (os.path.isfile(path) and _sha256_of(path) == submission.sha256):
            path = os.path.join(scratch, os.path.basename(submission.path))    # another node: the shipped bytes
            with open(path, "wb") as f:
                f.write(submission.source)
        report = os.path.join(scratch, "result.json")
        task_dir = plan.task_dir if os.path.isabs(plan.task_dir) else os.path.join(ROOT, plan.task_dir)
        command = [sys.executable, os.path.join(ROOT, "eval.py"), plan.mode, "--submission", path,
                   "--task", task_dir, "--json", report, "--quiet"]
        command += ["--timeout", str(plan.timeout)] if plan.timeout is not None else []
        command += ["--emulate-blackwell"] if plan.emulate_blackwell else []
        if plan.spec_text is not None:
            spec = os.path.join(scratch, "spec.txt")
            with open(spec, "w") as f:
                f.write(plan.spec_text)
            command.insert(3, spec)
        # A whole run may take every case's timeout, the worker's start and the timing after each case (a
        # fitted timeout: the most one request gets before a call answered, a build included).
        per_case = plan.timeout if plan.timeout is not None else FITTED_TIMEOUT_BOUND_S
        deadline = per_case * (plan.case_count + 1) + 300
        environment = {k: v for k, v in os.environ.items() if not k.startswith("POPCORN_")}
        if plan.on_gpu:     # Ray caps a 1-CPU task at one OpenMP thread; a single run on a GPU has no such cap
            environment.pop("OMP_NUM_THREADS", None)
            if plan.driver_omp_threads is not None:
                environment["OMP_NUM_THREADS"] = plan.driver_omp_threads
        claim = claim_cores(plan.slots)
        cores = claim[0] if claim else None
        # A cpuset fences the cores in (affinity alone the submission widens with one call of its own).
        fence, pinning = Cpuset.make(cores, f"nvfp4-arena-{os.getpid()}-{min(cores)}") if cores else (None, "")
        pinning = "cpuset cgroup" if fence else pinning

        def start():
            die_with_parent()       # a lost Ray worker takes its run with it (Ray runs it again)
            if fence:
                fence.enter()
            if cores:
                os.sched_setaffinity(0, cores)
        process = subprocess.Popen(command, cwd=ROOT, env=environment, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   start_new_session=True, preexec_fn=start)
        overran = False
        try:
            stdout, stderr = process.communicate(timeout=deadline)
        except subprocess.TimeoutExpired:
            overran = True
            _stop(process)
            stdout, stderr = process.communicate()
        finally:
            if fence:
                fence.remove()
            if claim:
                release_cores(claim[1])     # the cores are free for the next evaluation
        doc = None
        if os.path.exists(report):
            try:
                doc = json.load(open(report))
            except ValueError:
                doc = None
    code = process.returncode
    row = {**row_identity(submission, plan), "evaluated": overran or code in EVALUATED_CODES,
           "passed": code == 0 and not overran, "exit_code": code, "geomean_us": None, "error": "", "cases": [],
           "attempts": attempt, "host": socket.gethostname(), "gpu": None,
           "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
           "cores": sorted(cores) if cores else None, "pinning": pinning,
           "wall_s": round(time.time() - started, 2), "started": round(started, 3),
           "finished": round(time.time(), 3)}
    if doc is not None:
        row["cases"] = _case_rows(doc)
        row["geomean_us"] = doc.get("geomean_us")
        row["gpu"] = (doc.get("system") or {}).get("gpu")
        refused = (doc.get("system") or {}).get("refused")
        failed = [c for c in row["cases"] if not c["passed"]]
        row["error"] = refused or (f"case {failed[0]['index']}: {failed[0]['error'] or 'failed'}" if failed else "")
    if overran:
        row["error"] = f"the evaluation ran past {deadline:.0f} s and was stopped"
    elif not row["error"] and code != 0:
        row["error"] = _last_error_line(stderr) or f"eval.py exited with code {code}"
    if not row["evaluated"]:
        row["output_tail"] = (stdout + stderr)[-2000:]
    row["agrees"] = agreement(row)
    return row


def _sha256_of(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()
