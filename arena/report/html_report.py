"""`--report FILE.html`: one self-contained HTML file (pictures inlined as data URIs, no script or style from
the network; the page is a Jinja2 template with autoescape, arena/report/templates.py) with, per case, the
verdict, the diagnosis, and pictures: the timed samples' distribution and the share of the speed of light for a
timed case; the error heatmap beside the reference's magnitude for a wrong output. `--plots DIR` writes the
same pictures as files (arena/report/figures.py: SVG charts, PNG maps and their titled SVGs)."""
from __future__ import annotations

import base64
import os
import re

from arena.report import figures, templates
from arena.report.results import CaseResult, RunInfo, geomean_us

STYLE = """
body { font-family: system-ui, sans-serif; margin: 24px; color: #222; max-width: 1200px; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 17px; margin: 0 0 6px 0; }
.meta { color: #666; font-size: 13px; }
.verdict { font-size: 18px; font-weight: 600; margin: 12px 0; }
.case { border: 1px solid #ddd; border-radius: 6px; padding: 12px 16px; margin: 14px 0; }
.pass { border-left: 6px solid #2a9d55; } .fail { border-left: 6px solid #d33; }
.mark-pass { color: #2a9d55; } .mark-fail { color: #d33; }
.diagnosis { background: #fff6e0; padding: 8px 10px; border-radius: 4px; margin: 8px 0; }
pre { background: #f6f6f6; padding: 8px; font-size: 12px; overflow-x: auto; white-space: pre-wrap; }
figure { display: inline-block; margin: 6px 18px 6px 0; vertical-align: top; }
figcaption { font-size: 12px; color: #555; max-width: 520px; }
img { image-rendering: pixelated; border: 1px solid #ccc; }
.legend span { display: inline-block; width: 12px; height: 12px; border: 1px solid #999; margin: 0 4px 0 12px;
               vertical-align: middle; }
table.stats td { padding: 1px 10px 1px 0; font-size: 13px; }
"""

BATCH_STYLE = ("table.rank { border-collapse: collapse; font-size: 13px; } table.rank td, table.rank th "
               "{ border-bottom: 1px solid #ddd; padding: 4px 8px; text-align: left; vertical-align: top; }"
               " .bar { height: 6px; background: #2a9d55; margin-top: 3px; } tr.fail { color: #777; }")

# Counts the pictures the browser decoded: a report test reads these attributes from the rendered page.
SCRIPT = """
window.addEventListener('load', function () {
  var imgs = document.images, ok = 0;
  for (var i = 0; i < imgs.length; i++) { if (imgs[i].complete && imgs[i].naturalWidth > 0) ok++; }
  document.body.setAttribute('data-images', imgs.length);
  document.body.setAttribute('data-images-decoded', ok);
});
"""


def _png(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _svg(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _rgb(colour) -> str:
    return "rgb({},{},{})".format(*colour)


def _timing(r: CaseResult, on_gpu: bool) -> dict | None:
    """A timed case's table rows, pictures and note, as the template shows them."""
    if not r.stats:
        return None
    s = r.stats
    calls = r.timing.get("calls_per_sample", 1)
    rows = [("mean ± err", f"{s.mean / 1e3:.3f} ± {s.err / 1e3:.3f} µs"), ("best", f"{s.best / 1e3:.3f} µs"),
            ("median", f"{s.median / 1e3:.3f} µs"), ("worst", f"{s.worst / 1e3:.3f} µs"), ("samples", str(s.runs)),
            ("method", str(r.timing.get("method", "")) + (f", {calls} calls per sample" if calls > 1 else ""))]
    pictures, note = [], ""
    if r.samples_ns:
        lo, hi = min(r.samples_ns) / 1e3, max(r.samples_ns) / 1e3
        pictures.append({"svg": _svg(figures.samples_histogram(r.samples_ns)), "alt": "timed samples",
                         "kind": "samples", "caption": f"distribution of the {len(r.samples_ns)} timed samples, "
                         f"{lo:.3f} µs (left edge) to {hi:.3f} µs (right edge); the red line is the mean"})
    if r.sol_us and not on_gpu:
        note = ("no speed-of-light picture: CPU times are not comparable with a B200's speed of light "
                f"({r.sol_us:g} µs)")
    elif r.sol_us:
        share = 100.0 * r.sol_us / (s.mean / 1e3)
        pictures.append({"svg": _svg(figures.sol_bar(s.mean / 1e3, r.sol_us)), "alt": "speed of light",
                         "kind": "sol", "caption": f"{share:.1f}% of the speed of light ({r.sol_us:g} µs on a B200, "
                         "from task.yml)"})
    return {"rows": rows, "pictures": pictures, "note": note}


def _errors(r: CaseResult) -> list[dict]:
    """A wrong output's heatmaps, one entry per output tensor."""
    return [{"label": f.label, "wrong": f.wrong, "cells": f.shape[0] * f.shape[1], "max_error": f"{f.max_error:.4g}",
             "rows": f.shape[0], "cols": f.shape[1], "error_png": _png(f.error_png),
             "reference_png": _png(f.reference_png)} for f in r.figures]


def _case(r: CaseResult, on_gpu: bool) -> dict:
    return {"index": r.index, "spec": r.spec, "passed": r.passed, "state": "pass" if r.passed else "fail",
            "error": r.error, "diagnosis": r.diagnosis, "evidence": "\n".join(str(x) for x in r.evidence),
            "timing": _timing(r, on_gpu), "errors": _errors(r), "warnings": [str(w) for w in r.warnings]}


def render_html(mode: str, task: str, submission: str, results: list[CaseResult], info: RunInfo) -> str:
    machine = info.machine
    passed = sum(r.passed for r in results)
    verdict = f"{passed} of {len(results)} cases passed"
    if mode in ("benchmark", "leaderboard"):
        geo = geomean_us(results)
        verdict += f"; geometric mean {geo:.3f} µs" if geo else ""
    on_gpu = bool(machine.get("gpu"))
    return templates.RUN_REPORT.render(
        style=STYLE, script=SCRIPT, mode=mode, submission=os.path.basename(submission), task=task,
        where=str(machine.get("gpu") or "CPU only"), torch=str(machine.get("torch")), python=str(machine.get("python")),
        verdict=verdict, refused=info.refused, cases=[_case(r, on_gpu) for r in results],
        legend=[(name, _rgb(c)) for name, c in figures.LEGEND.items()],
        ramp=", ".join(_rgb(c) for c in figures.HEAT))


def write_report(path: str, mode: str, task: str, submission: str, results: list[CaseResult], info: RunInfo):
    with open(path, "w", encoding="utf-8") as f:
        f.write(render_html(mode, task, submission, results, info))


def write_plots(folder: str, results: list[CaseResult], on_gpu: bool = True) -> list[str]:
    """The report's pictures as files in `folder`; the paths written: the charts as SVG, each heatmap as its PNG map
    (one pixel per cell) and as an SVG with its title and legend. Off a GPU no speed-of-light bar: a CPU's time
    against a B200's speed of light would be an empty bar."""
    os.makedirs(folder, exist_ok=True)
    written = []

    def save(name: str, data: bytes | str):
        path = os.path.join(folder, name)
        with open(path, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        written.append(path)
    for r in results:
        if r.samples_ns:
            save(f"case{r.index}_samples.svg",
                 figures.samples_histogram(r.samples_ns, title=f"case {r.index}: {r.spec}"))
        if r.stats and r.sol_us and on_gpu:
            save(f"case{r.index}_sol.svg", figures.sol_bar(r.stats.mean / 1e3, r.sol_us))
        for f in r.figures:
            label = re.sub(r"[^A-Za-z0-9]+", "_", f.label).strip("_")
            save(f"case{r.index}_{label}_error.png", f.error_png)
            save(f"case{r.index}_{label}_reference.png", f.reference_png)
            save(f"case{r.index}_{label}_error.svg", figures.titled_map(f.error_png, f.error_title))
            save(f"case{r.index}_{label}_reference.svg", figures.titled_map(f.reference_png, f.reference_title))
    return written


def write_pictures(mode, task_name, submission, results, info, report_path, plots_dir) -> tuple[bool, list[str]]:
    """--report and --plots: whether all were written, and the lines to say on stderr (a failure to write one
    is one line; the results stand)."""
    said = []
    try:
        if report_path:
            write_report(report_path, mode, task_name, submission, results, info)
            said.append(f"report: {report_path}")
        if plots_dir:
            written = write_plots(plots_dir, results, bool(info.machine.get("gpu")))
            said.append(f"plots: {len(written)} files in {plots_dir}")
    except OSError as error:
        return False, said + [f"error: cannot write the report or plots: {error}"]
    return True, said


# ---- eval.py batch --report: the ranking ---------------------------------------------------------------------

def render_batch_html(title: str, rows: list[dict], timed: bool) -> str:
    """The batch's ranked rows (arena/batch/jobs.py row dicts, already ranked) as one table; in a timed mode each
    passing row gets a bar of its geomean against the fastest."""
    cases = sorted({c["index"] for r in rows for c in r.get("cases", [])})
    best = min((r["geomean_us"] for r in rows if r.get("passed") and r.get("geomean_us")), default=None)
    shown = []
    for number, r in enumerate(rows, 1):
        geo, by_index = r.get("geomean_us"), {c["index"]: c for c in r.get("cases", [])}
        gpu = str(r.get("gpu") or "") + (f" #{r['cuda_visible_devices']}" if r.get("cuda_visible_devices") else "")
        shown.append({
            "number": number if r.get("passed") else "", "path": r["path"],
            "state": "pass" if r.get("passed") else "fail",
            "verdict": "✔ passed" if r.get("passed") else ("✘ failed" if r.get("evaluated") else "? lost"),
            "figure": (f"{geo:.3f}" if geo else "—") if timed else
            f"{sum(1 for c in r.get('cases', []) if c.get('passed'))}/{len(r.get('cases', []))}",
            "bar": max(2, min(100, 100 * best / geo)) if timed and geo and best else None,
            "per_case": [f"{by_index[i]['mean_us']:.3f} ± {by_index[i]['err_us']:.3f}"
                         if i in by_index and by_index[i].get("mean_us") else "—" for i in cases] if timed else [],
            "expected": r.get("expected") or "", "agrees": r.get("agrees") or "",
            "wall": f"{r['wall_s']:.0f}" if r.get("wall_s") else "", "error": (r.get("error") or "")[:300],
            "gpu": gpu, "attempts": r.get("attempts") or ""})
    return templates.BATCH_REPORT.render(
        style=STYLE + BATCH_STYLE, title=title, timed=timed, cases=cases, rows=shown,
        expected=any(r.get("expected") for r in rows), passed=sum(1 for r in rows if r.get("passed")))


def write_batch_report(path: str, title: str, rows: list[dict], timed: bool):
    with open(path, "w", encoding="utf-8") as f:
        f.write(render_batch_html(title, rows, timed))
