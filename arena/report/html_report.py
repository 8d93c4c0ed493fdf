"""`--report FILE.html`: one self-contained HTML file (pictures inlined as data URIs, no script or style from
the network) with, per case, the verdict, the diagnosis, and pictures: the timed samples' distribution and the
share of the speed of light for a timed case; the error heatmap beside the reference's magnitude for a wrong
output. `--plots DIR` writes the same pictures as PNG files."""
from __future__ import annotations

import base64
import html
import os
import re

from arena.report import figures
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

# Counts the pictures the browser decoded: a report test reads these attributes from the rendered page.
SCRIPT = """
window.addEventListener('load', function () {
  var imgs = document.images, ok = 0;
  for (var i = 0; i < imgs.length; i++) { if (imgs[i].complete && imgs[i].naturalWidth > 0) ok++; }
  document.body.setAttribute('data-images', imgs.length);
  document.body.setAttribute('data-images-decoded', ok);
});
"""


def _img(data: bytes, alt: str, kind: str) -> str:
    return (f'<img class="{kind}" alt="{html.escape(alt)}" '
            f'src="data:image/png;base64,{base64.b64encode(data).decode()}">')


def _rgb(colour) -> str:
    return "rgb({},{},{})".format(*colour)


def _legend() -> str:
    items = "".join(f'<span style="background:{_rgb(c)}"></span>{html.escape(name)}'
                    for name, c in figures.LEGEND.items())
    ramp = ", ".join(_rgb(c) for c in figures.HEAT)
    return (f'<div class="legend">{items}<span style="width:60px;background:linear-gradient(to right,{ramp})">'
            '</span>wrong: |out − ref|, log scale, small → largest</div>')


def _timing_html(r: CaseResult, on_gpu: bool = True) -> str:
    if not r.stats:
        return ""
    s = r.stats
    rows = [("mean ± err", f"{s.mean / 1e3:.3f} ± {s.err / 1e3:.3f} µs"), ("best", f"{s.best / 1e3:.3f} µs"),
            ("median", f"{s.median / 1e3:.3f} µs"), ("worst", f"{s.worst / 1e3:.3f} µs"), ("samples", str(s.runs)),
            ("method", html.escape(str(r.timing.get("method", ""))) +
             (f", {r.timing.get('calls_per_sample')} calls per sample" if r.timing.get("calls_per_sample", 1) > 1 else ""))]
    out = '<table class="stats">' + "".join(f"<tr><td>{k}</td><td>{v}</td></tr>" for k, v in rows) + "</table>"
    if r.samples_ns:
        lo, hi = min(r.samples_ns) / 1e3, max(r.samples_ns) / 1e3
        out += (f'<figure>{_img(figures.samples_histogram(r.samples_ns), "timed samples", "samples")}'
                f"<figcaption>distribution of the {len(r.samples_ns)} timed samples, {lo:.3f} µs (left edge) to "
                f"{hi:.3f} µs (right edge); the red line is the mean</figcaption></figure>")
    if r.sol_us and not on_gpu:
        out += ("<div>no speed-of-light picture: CPU times are not comparable with a B200's speed of light "
                f"({r.sol_us:g} µs)</div>")
    elif r.sol_us:
        share = 100.0 * r.sol_us / (s.mean / 1e3)
        out += (f'<figure>{_img(figures.sol_bar(s.mean / 1e3, r.sol_us), "speed of light", "sol")}'
                f"<figcaption>{share:.1f}% of the speed of light ({r.sol_us:g} µs on a B200, from task.yml)"
                "</figcaption></figure>")
    return out


def _error_html(r: CaseResult) -> str:
    if not r.figures:
        return ""
    parts = [_legend()]
    for f in r.figures:
        rows, cols = f.shape[0], f.shape[1]
        parts.append(
            f'<div class="errors"><h3 style="font-size:14px;margin:8px 0 2px">{html.escape(f.label)}: {f.wrong} wrong '
            f"of {rows * cols} elements, largest error {f.max_error:.4g}</h3>"
            f'<figure>{_img(f.error_png, "error heatmap " + f.label, "heatmap")}<figcaption>|out − ref| per element, '
            f"{rows} rows (down) × {cols} columns (across), at most 512 × 512 cells (a cell shows its worst element)"
            f'</figcaption></figure><figure>{_img(f.reference_png, "reference magnitude " + f.label, "magnitude")}'
            "<figcaption>|ref|, the reference's magnitude (dark = large), same grid</figcaption></figure></div>")
    return "".join(parts)


def _case_html(r: CaseResult, on_gpu: bool = True) -> str:
    state = "pass" if r.passed else "fail"
    head = (f'<h2><span class="mark-{state}">{"✔ pass" if r.passed else "✘ FAIL"}</span> case {r.index}: '
            f"{html.escape(r.spec)}</h2>")
    body = []
    if r.error:
        body.append(f"<div><b>error:</b> {html.escape(r.error)}</div>")
    if r.diagnosis:
        body.append(f'<div class="diagnosis"><b>diagnosis:</b> {html.escape(r.diagnosis)}</div>')
    if r.evidence:
        body.append("<pre>" + html.escape("\n".join(str(x) for x in r.evidence)) + "</pre>")
    body.append(_timing_html(r, on_gpu))
    body.append(_error_html(r))
    if r.warnings:
        body.append("<div><b>warnings:</b><ul>" + "".join(f"<li>{html.escape(str(w))}</li>" for w in r.warnings)
                    + "</ul></div>")
    return f'<section class="case {state}" id="case-{r.index}">{head}{"".join(body)}</section>'


def render_html(mode: str, task: str, submission: str, results: list[CaseResult], info: RunInfo) -> str:
    machine = info.machine
    where = machine.get("gpu") or "CPU only"
    passed = sum(r.passed for r in results)
    verdict = f"{passed} of {len(results)} cases passed"
    if mode in ("benchmark", "leaderboard"):
        geo = geomean_us(results)
        verdict += f"; geometric mean {geo:.3f} µs" if geo else ""
    header = (f"<h1>nvfp4-arena {html.escape(mode)}: {html.escape(os.path.basename(submission))}</h1>"
              f'<div class="meta">task {html.escape(task)} · {html.escape(str(where))} · torch '
              f"{html.escape(str(machine.get('torch')))} · Python {html.escape(str(machine.get('python')))}</div>"
              f'<div class="verdict" id="verdict">{html.escape(verdict)}</div>')
    if info.refused:
        header += f"<div><b>refused:</b> {html.escape(info.refused)}</div>"
    cases = "".join(_case_html(r, bool(machine.get("gpu"))) for r in results)
    return (f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>nvfp4-arena {html.escape(mode)}</title>'
            f"<style>{STYLE}</style><script>{SCRIPT}</script></head><body>{header}{cases}</body></html>")


def write_report(path: str, mode: str, task: str, submission: str, results: list[CaseResult], info: RunInfo):
    with open(path, "w", encoding="utf-8") as f:
        f.write(render_html(mode, task, submission, results, info))


def write_plots(folder: str, results: list[CaseResult], on_gpu: bool = True) -> list[str]:
    """The report's pictures as PNG files in `folder`; the paths written. Off a GPU no speed-of-light bar: a
    CPU's time against a B200's speed of light would be an empty bar."""
    os.makedirs(folder, exist_ok=True)
    written = []

    def save(name: str, data: bytes):
        path = os.path.join(folder, name)
        with open(path, "wb") as f:
            f.write(data)
        written.append(path)
    for r in results:
        if r.samples_ns:
            save(f"case{r.index}_samples.png",
                 figures.samples_histogram(r.samples_ns, title=f"case {r.index}: {r.spec}"))
        if r.stats and r.sol_us and on_gpu:
            save(f"case{r.index}_sol.png", figures.sol_bar(r.stats.mean / 1e3, r.sol_us))
        for f in r.figures:
            label = re.sub(r"[^A-Za-z0-9]+", "_", f.label).strip("_")
            save(f"case{r.index}_{label}_error.png", f.error_titled_png or f.error_png)
            save(f"case{r.index}_{label}_reference.png", f.reference_titled_png or f.reference_png)
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
            said.append(f"plots: {len(written)} PNG files in {plots_dir}")
    except OSError as error:
        return False, said + [f"error: cannot write the report or plots: {error}"]
    return True, said


# ---- eval.py batch --report: the ranking ---------------------------------------------------------------------

def render_batch_html(title: str, rows: list[dict], timed: bool) -> str:
    """The batch's ranked rows (arena/batch/jobs.py row dicts, already ranked) as one table; in a timed mode each
    passing row gets a bar of its geomean against the fastest."""
    cases = sorted({c["index"] for r in rows for c in r.get("cases", [])})
    best = min((r["geomean_us"] for r in rows if r.get("passed") and r.get("geomean_us")), default=None)
    expected = any(r.get("expected") for r in rows)
    head = "".join(f"<th>{h}</th>" for h in ["#", "submission", "verdict", "geomean µs" if timed else "cases"]
                   + ([f"case {i} µs" for i in cases] if timed else []) + (["expected", "agrees"] if expected else [])
                   + ["wall s", "first error", "GPU", "attempts"])
    body = []
    for number, r in enumerate(rows, 1):
        state = "pass" if r.get("passed") else "fail"
        verdict = "✔ passed" if r.get("passed") else ("✘ failed" if r.get("evaluated") else "? lost")
        if timed:
            geo = r.get("geomean_us")
            figure = "—" if not geo else (f"{geo:.3f}" + (
                f'<div class="bar" style="width:{max(2, min(100, 100 * best / geo)):.0f}%"></div>' if best else ""))
        else:
            figure = f"{sum(1 for c in r.get('cases', []) if c.get('passed'))}/{len(r.get('cases', []))}"
        per_case = ""
        if timed:
            by_index = {c["index"]: c for c in r.get("cases", [])}
            per_case = "".join(
                f"<td>{by_index[i]['mean_us']:.3f} ± {by_index[i]['err_us']:.3f}</td>"
                if i in by_index and by_index[i].get("mean_us") else "<td>—</td>" for i in cases)
        agreement = (f"<td>{html.escape(r.get('expected') or '')}</td><td>{html.escape(r.get('agrees') or '')}</td>"
                     if expected else "")
        wall = f"{r['wall_s']:.0f}" if r.get("wall_s") else ""
        body.append(f'<tr class="{state}"><td>{number if r.get("passed") else ""}</td>'
                    f"<td>{html.escape(r['path'])}</td><td class=\"mark-{state}\">{verdict}</td><td>{figure}</td>"
                    f"{per_case}{agreement}<td>{wall}</td><td>{html.escape((r.get('error') or '')[:300])}</td>"
                    f"<td>{html.escape(str(r.get('gpu') or '') + (' #' + str(r['cuda_visible_devices']) if r.get('cuda_visible_devices') else ''))}</td>"
                    f"<td>{r.get('attempts') or ''}</td></tr>")
    passed = sum(1 for r in rows if r.get("passed"))
    style = STYLE + ("table.rank { border-collapse: collapse; font-size: 13px; } table.rank td, table.rank th "
                     "{ border-bottom: 1px solid #ddd; padding: 4px 8px; text-align: left; vertical-align: top; }"
                     " .bar { height: 6px; background: #2a9d55; margin-top: 3px; } tr.fail { color: #777; }")
    return (f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f"<style>{style}</style></head><body><h1>{html.escape(title)}</h1>"
            f'<div class="verdict" id="verdict">{passed} of {len(rows)} submissions passed</div>'
            f'<table class="rank"><tr>{head}</tr>{"".join(body)}</table></body></html>')


def write_batch_report(path: str, title: str, rows: list[dict], timed: bool):
    with open(path, "w", encoding="utf-8") as f:
        f.write(render_batch_html(title, rows, timed))
