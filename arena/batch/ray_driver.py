"""The driver of `eval.py batch`: starts (or joins) a Ray cluster, hands each submission to `batch.evaluate_one`
on a GPU (or a core) of it, streams the rows to the JSONL file as they finish, shows progress, and ends with a
ranked table. Imports Ray only inside `run_batch`, so `batch` without Ray is one line."""
from __future__ import annotations

import dataclasses
import json
import os
import time

from arena.report.exit_codes import EXIT_FAILED, EXIT_NOT_RUN, EXIT_OK
from arena.report.progress import PLAIN_EVERY_S
from arena.batch.jobs import (RAY_INSTALL, RETRIES, ROOT, BatchPlan, Submission, evaluate_one,
                         row_identity, row_key)

# What a cluster node needs of this folder to run eval.py (only with --address: a local cluster reads it here)
UPLOAD_EXCLUDES = [".git", ".official", ".public", "**/__pycache__", "*.so", "*.o", "*.whl", "*.tar.xz"]


class AttemptCounter:
    """Lives on the driver's node: how many times each evaluation started (more than once after a loss)."""

    def __init__(self):
        self.counts = {}

    def start(self, key: str) -> int:
        self.counts[key] = self.counts.get(key, 0) + 1
        return self.counts[key]


def _import_ray():
    try:
        import ray
    except ImportError:
        return None
    return ray


def ray_missing_line() -> str | None:
    """None when Ray can be imported; else the one line `batch` prints."""
    if _import_ray() is None:
        return f"batch needs Ray, which is not installed: {RAY_INSTALL}"
    return None


def _start_ray(ray, address: str | None, gpus: int | None):
    import logging
    runtime_env = None
    if address:         # other machines: they get this folder (eval.py, arena/, the tasks) from the driver
        runtime_env = {"working_dir": ROOT, "excludes": UPLOAD_EXCLUDES}
    local = {} if address or gpus is None else {"num_gpus": gpus}      # Ray's own count of the GPUs otherwise
    # Without --address, always a new instance on this machine: Ray would otherwise join RAY_ADDRESS or the
    # last `ray start` cluster, whose other nodes would lack this folder.
    ray.init(address=address or "local", include_dashboard=False, log_to_driver=False,
             logging_level=logging.ERROR, runtime_env=runtime_env, configure_logging=True, **local)


def _lost_row(submission: Submission, plan: BatchPlan, error: Exception) -> dict:
    """An evaluation Ray could not finish after every retry: no verdict, so a later batch runs it again."""
    text = str(error).strip().splitlines()
    return {**row_identity(submission, plan), "evaluated": False, "passed": False, "exit_code": None,
            "geomean_us": None,
            "error": f"the evaluation was lost ({type(error).__name__}: {text[0] if text else ''})"[:300],
            "cases": [], "attempts": None, "finished": round(time.time(), 3)}


def _rows_for(submission: Submission, row: dict) -> list[dict]:
    """The row of an evaluation, and a copy for every other path with the same content."""
    return [row] + [{**row, "path": other, "same_as": submission.path} for other in submission.also]


Job = tuple[Submission, BatchPlan]     # one evaluation


def run_batch(jobs: list[Job], jsonl: str, address: str | None, console, progress_console, earlier: dict,
              gpus: int | None = None, per_gpu: int = 1) -> tuple[int, list[dict]]:
    """Evaluate every job whose row is not in `earlier`, `per_gpu` at once on each GPU; append each row to
    `jsonl` as it comes; return the exit code and every row of this batch (earlier ones included), ranked."""
    ray = _import_ray()
    rows, todo = [], []
    for submission, plan in jobs:
        key = row_key(row_identity(submission, plan))
        if key in earlier:
            rows.extend({**r, "resumed": True}
                        for r in _rows_for(submission, {**earlier[key], "path": submission.path}))
        else:
            todo.append((submission, plan))
    if rows:
        progress_console.print(f"[batch] {len(rows)} row(s) already in {jsonl}: not evaluated again",
                               highlight=False, markup=False)
    wall = None
    if todo:
        started = time.monotonic()
        rows.extend(_fan_out(ray, todo, jsonl, address, progress_console, gpus, per_gpu))
        wall = time.monotonic() - started
    ranked = rank(rows, jobs[0][1].mode)
    render_table(console, ranked, jobs, wall)
    return (EXIT_OK if ranked and all(r.get("passed") for r in ranked) else EXIT_FAILED), ranked


def _fan_out(ray, todo: list[Job], jsonl: str, address, progress_console, gpus: int | None,
             per_gpu: int) -> list[dict]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    progress_console.print(f"[batch] starting Ray ({address or 'a local instance'})", highlight=False, markup=False)
    _start_ray(ray, address, gpus)
    started = time.monotonic()
    try:
        gpus = int(ray.cluster_resources().get("GPU", 0))
        cpus = int(ray.cluster_resources().get("CPU", 1))
        where = (f"{gpus} GPU(s), {per_gpu} evaluation(s) per GPU at once" if gpus
                 else f"{cpus} CPU core(s), no GPU")
        progress_console.print(f"[batch] {len(todo)} submission(s) on {where}; rows stream to {jsonl}",
                               highlight=False, markup=False)
        counter = ray.remote(num_cpus=0)(AttemptCounter).options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(),
                                                               soft=False)).remote()
        # A fraction of a GPU each: Ray places `per_gpu` evaluations on a GPU at once, never more.
        task = ray.remote(evaluate_one).options(num_gpus=1 / per_gpu if gpus else 0, num_cpus=1,
                                                max_retries=RETRIES, retry_exceptions=False)
        placed = dict(on_gpu=bool(gpus), driver_omp_threads=os.environ.get("OMP_NUM_THREADS"),
                      slots=int(gpus) * per_gpu if gpus else cpus)
        pending = {task.remote(s, dataclasses.replace(plan, **placed), counter): (s, plan) for s, plan in todo}
        rows = []
        bar = Progress(TextColumn("batch"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                       TextColumn("{task.description}"), console=progress_console, transient=True,
                       disable=not progress_console.is_terminal)
        with bar, open(jsonl, "a") as out:
            job = bar.add_task("", total=len(pending))
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1, timeout=PLAIN_EVERY_S)
                if not done:            # a pipe or a log hears that the batch goes on
                    progress_console.print(f"[batch] still evaluating {len(pending)} of {len(todo)} "
                                           f"({time.monotonic() - started:.0f} s)", highlight=False, markup=False)
                    continue
                submission, plan = pending.pop(done[0])
                try:
                    row = ray.get(done[0])
                except Exception as error:          # every retry lost (RayTaskError, WorkerCrashedError, ...)
                    row = _lost_row(submission, plan, error)
                for r in _rows_for(submission, row):
                    out.write(json.dumps(r) + "\n")
                    rows.append(r)
                out.flush()
                bar.advance(job)
                bar.update(job, description=os.path.basename(submission.path))
                progress_console.print(f"[batch] {len(todo) - len(pending)}/{len(todo)} {_one_line(row)}",
                                       highlight=False, markup=False)
        return rows
    finally:
        ray.shutdown()


def _one_line(row: dict) -> str:
    verdict = "passed" if row.get("passed") else ("FAILED" if row.get("evaluated") else "NOT EVALUATED")
    figure = f" {row['geomean_us']:.2f} µs" if row.get("geomean_us") else ""
    where = f" on GPU {row['cuda_visible_devices']}" if row.get("cuda_visible_devices") else ""
    retry = f", {row['attempts']} attempts" if (row.get("attempts") or 1) > 1 else ""
    error = f": {row['error']}" if row.get("error") else ""
    return f"{row['path']}: {verdict}{figure}{where} ({row.get('wall_s', '?')} s{retry}){error}"[:240]


def rank(rows: list[dict], mode: str) -> list[dict]:
    """Passing rows first, fastest first in a timed mode; then failing rows; then rows with no verdict."""
    def order(row):
        timed = row.get("geomean_us") if mode != "test" else None
        group = 0 if row.get("passed") else (1 if row.get("evaluated") else 2)
        return group, timed if timed is not None else float("inf"), row["path"]
    return sorted(rows, key=order)


def summary(ranked: list[dict], wall: float | None) -> list[str]:
    """The lines under the table: the agreement with a manifest's expected verdicts, and the batch's wall
    time against its slowest evaluation's."""
    lines = []
    judged = [r for r in ranked if r.get("agrees")]
    if any(r.get("expected") for r in ranked):
        agree = sum(r["agrees"] == "yes" for r in judged)
        unjudged = sum(1 for r in ranked if r.get("expected") and not r.get("agrees"))
        lines.append(f"agreement with the manifest: {agree} of {len(judged)} judged files "
                     f"({100 * agree / max(1, len(judged)):.0f} %); {unjudged} with an expected verdict not "
                     "judged here (not judged, or no verdict)")
    walls = [r["wall_s"] for r in ranked if r.get("wall_s") and not r.get("resumed") and not r.get("same_as")]
    if wall is not None and walls:
        lines.append(f"wall time: {wall:.0f} s for {len(walls)} evaluation(s); the slowest took {max(walls):.0f} s "
                     f"({wall / max(walls):.2f}x), all together {sum(walls):.0f} s ({sum(walls) / wall:.1f} at once "
                     "on average)")
    return lines


def render_table(console, ranked: list[dict], jobs: list[Job], wall: float | None = None):
    from rich.table import Table
    from rich.text import Text
    plans = {plan.cases_id: plan for _, plan in jobs}
    plan = jobs[0][1]
    timed = plan.mode != "test"
    expected = any(r.get("expected") for r in ranked)
    folders = {os.path.dirname(row["path"]) for row in ranked}
    common = folders.pop() if len(folders) == 1 else ""       # one folder: named once, in the title
    tasks = sorted({p.task_name for _, p in jobs})
    title = (f"batch: {', '.join(tasks)} {plan.mode}" + (" --emulate-blackwell" if plan.emulate_blackwell else "")
             + (f" ({plan.cases_id})" if len(plans) == 1 else "") + (f" in {common}" if common else ""))
    table = Table(title=title, title_justify="left")
    names = ["#", "submission", "verdict", "geomean µs" if timed else "cases passed"]
    names += ["expected", "agrees"] if expected else []
    names += ["wall s", "first error"]
    for name in names:
        table.add_column(name, overflow="fold", justify="right" if name in ("#", "geomean µs", "wall s") else "left",
                         no_wrap=name == "submission")
    for number, row in enumerate(ranked, 1):
        passed_cases = sum(1 for c in row.get("cases", []) if c.get("passed"))
        figure = (f"{row['geomean_us']:.2f}" if row.get("geomean_us") else "—") if timed else \
            f"{passed_cases}/{len(row.get('cases', []))}"
        if row.get("exit_code") == EXIT_NOT_RUN:
            verdict = Text("– not judged", style="yellow")
        else:
            verdict = Text("✔ passed", style="green") if row.get("passed") else \
                Text("✘ failed" if row.get("evaluated") else "? lost", style="red")
        shown = os.path.relpath(row["path"], common) if common else row["path"]
        cells = [str(number) if row.get("passed") else "", Text(shown), verdict, figure]
        cells += [row.get("expected") or "", Text(row.get("agrees") or "", style="red" if row.get("agrees") == "NO"
                                                   else "")] if expected else []
        cells += [f"{row['wall_s']:.0f}" if row.get("wall_s") else "", Text((row.get("error") or "")[:160])]
        table.add_row(*cells)
    console.print(table)
    for line in summary(ranked, wall):
        console.print(line, highlight=False, markup=False)
