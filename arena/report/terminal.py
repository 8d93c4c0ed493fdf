"""Writing results: the competition's `key: value` lines, a readable terminal report, and JSON."""
from __future__ import annotations

import base64
import json
import os
import platform
import shutil
import subprocess

import torch
from rich.markup import escape

from arena.report.results import ProbeResult
from arena.report.results import CaseResult, RunInfo, geomean_us, not_judged_words, predicted_geomean_us


# ---- the competition's result channel (POPCORN_FD) -------------------------------------------------

def popcorn_lines(mode: str, results: list[CaseResult], reports: dict | None = None,
                  complete: bool = True) -> list[tuple[str, str]]:
    """Exactly the keys the official evaluators write, in their order; times in ns. A run that was stopped
    (`complete` false) writes the cases it finished and `check: fail`."""
    lines = []
    if mode in ("test", "predict"):
        lines.append(("test-count", str(len(results))))
        for r in results:
            lines += [(f"test.{r.index}.spec", r.spec), (f"test.{r.index}.status", "pass" if r.passed else "fail")]
            if r.prediction.get("b200_us"):     # an extra key: the predicted B200 time, in ns as times are
                lines.append((f"test.{r.index}.b200_predicted", str(round(r.prediction["b200_us"] * 1e3))))
            if not r.passed:
                lines.append((f"test.{r.index}.error", _one_line(r.error)))
                if r.not_run:   # an extra key (the official runner ignores keys it does not know): not judged
                    lines.append((f"test.{r.index}.not_run", _one_line(r.not_run)))
            elif r.message:
                lines.append((f"test.{r.index}.message", _one_line(r.message)))
    elif mode == "profile":
        lines.append(("benchmark-count", str(len(results))))
        for r in results:
            lines.append((f"benchmark.{r.index}.spec", r.spec))
            text = (reports or {}).get(r.index, "") or r.error
            lines.append((f"benchmark.{r.index}.report", base64.b64encode(text.encode(), altchars=b"+*").decode()))
    else:
        lines.append(("benchmark-count", str(len(results))))
        for r in results:
            lines.append((f"benchmark.{r.index}.spec", r.spec))
            if r.passed and r.stats:
                s = r.stats
                lines += [(f"benchmark.{r.index}.{k}", str(v))
                          for k, v in (("runs", s.runs), ("mean", s.mean), ("std", s.std), ("err", s.err),
                                       ("best", s.best), ("worst", s.worst))]
                if r.untrusted:         # an extra key: the official runner ignores keys it does not know
                    lines.append((f"benchmark.{r.index}.untrusted", _one_line(r.untrusted)))
            else:
                lines += [(f"benchmark.{r.index}.status", "fail"), (f"benchmark.{r.index}.error", _one_line(r.error))]
                if r.not_run:
                    lines.append((f"benchmark.{r.index}.not_run", _one_line(r.not_run)))
    passed = complete and all(r.passed for r in results)
    lines.append(("check", "pass" if passed else "fail"))
    return lines


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def write_popcorn(fd: int, lines: list[tuple[str, str]]):
    with os.fdopen(fd, "w") as out:
        for key, value in lines:
            out.write(f"{key}: {value}\n")


# ---- the machine -------------------------------------------------------------------------------------

def system_info() -> dict:
    info = {"python": platform.python_version(), "torch": torch.__version__, "host": platform.machine()}
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        info.update(gpu=props.name, capability=f"sm_{props.major}{props.minor}", sms=props.multi_processor_count,
                    l2_mb=round(props.L2_cache_size / 2**20, 1), cuda=torch.version.cuda, driver=_driver_version())
    else:
        info["gpu"] = None
    return info


def _driver_version() -> str | None:
    if not shutil.which("nvidia-smi"):
        return None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10).stdout
        return out.strip().splitlines()[0] if out.strip() else None
    except (OSError, subprocess.SubprocessError):
        return None


# ---- JSON --------------------------------------------------------------------------------------------

def json_doc(mode: str, task: str, submission: str, results: list[CaseResult], info: RunInfo | None,
             reports: dict | None = None, cases_total: int | None = None) -> dict:
    """The --json document. `info` None: the run is still going (written after each case, `complete` false)."""
    total = len(results) if cases_total is None else cases_total
    doc = {"mode": mode, "task": task, "submission": submission,
           "complete": info is not None and not info.stopped,
           "cases_total": total, "cases_finished": len(results),
           "system": info.system_json() if info else None,
           "passed": bool(results) and all(r.passed for r in results) and len(results) == total,
           "cases": [r.as_dict() for r in results],
           "static_warnings": info.static_warnings if info else [], "integrity": info.integrity if info else None}
    if mode == "predict":
        doc["predicted_geomean_us"] = predicted_geomean_us(results)
        doc["units"] = {"cases[].prediction": "us (times), bytes, multiply-adds"}
    if mode in ("benchmark", "leaderboard"):
        doc["geomean_us"] = geomean_us(results)
        doc["units"] = {"cases[].stats": "ns per call (as the competition's benchmark.N.* keys)",
                        "cases[].wall": "ns per call", "geomean_us": "us", "cases[].sol_us": "us",
                        "cases[].timing.harness_s": "s", "system.wall_s": "s"}
    if reports:
        doc["profiles"] = {str(k): v for k, v in reports.items()}
    return doc


def write_json(path: str, mode: str, task: str, submission: str, results: list[CaseResult], info: RunInfo | None,
               reports: dict | None = None, cases_total: int | None = None):
    from arena.report.outputs import write_json_atomically
    write_json_atomically(path, json_doc(mode, task, submission, results, info, reports, cases_total))


# ---- the terminal ------------------------------------------------------------------------------------

def _method_text(timing: dict) -> str:
    calls = timing.get("calls_per_sample", 1)
    if timing.get("method") == "competition" and calls > 1:
        return f"competition method, {calls} distinct inputs back to back per sample, mean per call"
    if timing.get("method") == "competition":
        return "competition method, every call alone with a cold L2 (as the competition times this task)"
    return "per-call, every call alone with a cold L2"


def print_failure_details(console, results: list) -> None:
    """Under the table, each failed case's details (mismatches, the traceback tail) and diagnosis, but one
    traceback only once: a later case with the same error and details points back to the first."""
    first_with = {}
    for r in results:
        if r.passed or not (r.details or r.diagnosis):
            continue
        key = (r.error, tuple(r.details))
        if r.details and not r.diagnosis and key in first_with:
            console.print(f"[bold]case {r.index}[/bold]: same error as case {first_with[key]}", highlight=False)
            continue
        first_with.setdefault(key, r.index)
        console.print(f"[bold]case {r.index}[/bold] ({escape(r.spec)}):", markup=True, highlight=False)
        for line in r.details[:8]:
            for part in str(line).split("\n"):        # a detail of several lines stays indented on each
                console.print(f"    {part}", markup=False, highlight=False)
        render_diagnosis(console, r)


def render_diagnosis(console, r: CaseResult):
    """The diagnosis of a wrong output (arena/diagnose/) under its case: a sentence, then the evidence."""
    if not r.diagnosis:
        return
    console.print("    [bold magenta]diagnosis:[/bold magenta] ", end="")
    console.print(r.diagnosis, markup=False, highlight=False)
    for line in r.evidence:
        console.print(f"      {line}", markup=False, highlight=False, style="dim")


def render(console, mode: str, results: list[CaseResult], info: RunInfo, reports: dict | None = None):
    from rich.table import Table
    from rich.text import Text

    machine = info.machine
    gpu = f"{machine['gpu']} ({machine['capability']}, {machine['sms']} SMs, L2 {machine['l2_mb']} MB), driver " \
          f"{machine.get('driver') or '?'}, CUDA {machine.get('cuda')}" if machine.get("gpu") else "CPU only"
    console.print(f"[dim]{gpu}; torch {machine['torch']}; Python {machine['python']}[/dim]")
    if info.import_error:
        return render_import_error(console, results, info)
    if mode == "diagnose":
        render_diagnose_report(console, results, reports)
        render_worker_output(console, results)     # an emulated kernel's lint warnings come on its stderr
        return
    if mode == "test":
        table = Table(show_header=True, header_style="bold")
        for column in ("", "#", "case", "result"):
            table.add_column(column)
        for r in results:
            mark = "[green]✔[/green]" if r.passed else "[yellow]–[/yellow]" if r.not_run else "[red]✘[/red]"
            table.add_row(mark, str(r.index), Text(r.spec), Text(r.message or "pass") if r.passed
                          else Text(not_judged_words(r.not_run), style="yellow") if r.not_run
                          else Text(r.error, style="red"))
        console.print(table)
        print_failure_details(console, results)
    elif mode == "profile":
        for r in results:
            console.print(f"[bold]case {r.index}[/bold] ({escape(r.spec)})")
            console.print((reports or {}).get(r.index) or r.error, markup=False, highlight=False)
    elif mode == "predict":
        render_predictions(console, results)
    else:
        table = Table(show_header=True, header_style="bold")
        for column in ("", "#", "case", "mean ± err (µs)", "best", "median", "runs", "% of SOL"):
            table.add_column(column, justify="right" if column not in ("", "case") else "left")
        for r in results:
            if r.passed and r.stats:
                s = r.stats
                sol = f"{100 * r.sol_us * 1e3 / s.mean:.1f}%" if r.sol_us else "—"
                mark = "[yellow]⚠ untrusted[/yellow]" if r.untrusted else "[green]✔[/green]"
                spread = f" ± {s.err / 1e3:.3f}" if s.runs > 1 else " (1 sample)"
                table.add_row(mark, str(r.index), Text(r.spec), f"{s.mean / 1e3:.3f}{spread}",
                              f"{s.best / 1e3:.3f}", f"{s.median / 1e3:.3f}", str(s.runs), sol)
            elif r.not_run:
                table.add_row("[yellow]–[/yellow]", str(r.index), Text(r.spec),
                              Text(not_judged_words(r.not_run), style="yellow"), "", "", "", "")
            else:
                table.add_row("[red]✘[/red]", str(r.index), Text(r.spec), Text(r.error, style="red"), "", "", "", "")
        geo = geomean_us(results)
        console.print(table)
        methods = sorted({_method_text(r.timing) for r in results if r.timing})
        if methods:
            console.print(f"[dim]timing: {'; '.join(methods)}[/dim]", highlight=False)
        clocks = [r.timing["gpu"] for r in results if r.timing.get("gpu")]
        if clocks:
            console.print(f"[dim]GPU during timing: SM {min(c['sm_mhz_min'] for c in clocks)}–"
                          f"{max(c['sm_mhz_max'] for c in clocks)} MHz, memory {clocks[-1]['mem_mhz']} MHz, "
                          f"{max(c['power_w'] for c in clocks):.0f} W, {max(c['temp_c'] for c in clocks)} °C[/dim]",
                          highlight=False)
        print_failure_details(console, results)
        if geo is not None:
            untrusted = [str(r.index) for r in results if r.untrusted]
            note = f" (includes untrusted case {', '.join(untrusted)})" if untrusted else ""
            console.print(f"geometric mean: [bold]{geo:.3f} µs[/bold]{note}")
        for r in results:
            if r.untrusted:
                console.print(Text(f"⚠ case {r.index}: timing untrusted, never ranked: {r.untrusted}", style="yellow"))
            for warning in r.warnings:
                if warning != r.untrusted:
                    console.print(Text(f"⚠ case {r.index}: {warning}", style="yellow"))
        for r in results:
            if not r.passed and r.diagnosis:
                console.print(f"[bold]case {r.index}[/bold] ({escape(r.spec)}):")
                render_diagnosis(console, r)
        if not info.machine.get("gpu"):
            console.print("[dim]CPU run: wall-clock times of the CPU, not comparable with GPU numbers.[/dim]")
    render_worker_output(console, results)
    render_integrity(console, mode, results, info)
    console.print(summary_line(results))


def render_predictions(console, results: list[CaseResult]):
    """predict mode: per case the predicted B200 time, its range and its parts (arena/predict/b200.py)."""
    from rich.table import Table
    from rich.text import Text
    table = Table(show_header=True, header_style="bold")
    for column in ("", "#", "case", "B200 µs (range)", "bound", "DRAM µs", "busiest SM µs", "MMA / TMA µs per CTA",
                   "CTAs (waves)"):
        table.add_column(column, justify="left" if column in ("", "case", "bound") else "right")
    for r in results:
        p = r.prediction
        if not r.passed:
            mark, words = ("[yellow]–[/yellow]", not_judged_words(r.not_run)) if r.not_run else ("[red]✘[/red]", r.error)
            table.add_row(mark, str(r.index), Text(r.spec), Text(words, style="yellow" if r.not_run else "red"))
        elif not p.get("b200_us"):
            table.add_row("[green]✔[/green]", str(r.index), Text(r.spec), Text(p.get("rests_on", "not predicted")))
        else:
            table.add_row("[green]✔[/green]", str(r.index), Text(r.spec),
                          f"{p['b200_us']:.2f} ({p['low_us']:.1f}–{p['high_us']:.1f})", p["bound"],
                          f"{p['dram_us']:.2f}" if p.get("dram_us") else "—",
                          f"{p['sm_us']:.2f}" if p.get("sm_us") else "—",
                          f"{p['mma_us_per_cta']:.2f} / {p['tma_us_per_cta']:.2f}" if p.get("ctas") else "—",
                          f"{p['ctas']} ({p['waves']})" if p.get("ctas") else "—")
    console.print(table)
    for r in results:
        if r.prediction.get("rests_on") and r.prediction.get("b200_us"):
            console.print(Text(f"case {r.index}: {r.prediction['rests_on']}"), style="dim")
    geo = predicted_geomean_us(results)
    if geo is not None:
        console.print(f"predicted B200 geometric mean: [bold]{geo:.2f} µs[/bold] (a model of the counts or of the "
                      "time here, not a B200 measurement: docs/b200_prediction.md)")
    print_failure_details(console, results)


def summary_line(results: list[CaseResult]) -> str:
    """The run's last line: how many passed, and how many this machine could not run (and why)."""
    passed, not_run = sum(r.passed for r in results), [r for r in results if r.not_run]
    failed = len(results) - passed - len(not_run)
    colour = "green" if passed == len(results) else "red" if failed else "yellow"
    lacks = f"; {len(not_run)} not judged here: {not_run[0].not_run}" if not_run else ""
    return f"[{colour}]{passed} of {len(results)} cases passed{lacks}[/{colour}]"


def render_import_error(console, results: list[CaseResult], info: RunInfo):
    """A submission that did not import: one line for the run, its own traceback once."""
    console.print(f"✘ none of the {len(results)} cases ran: {info.import_error}", style="red", markup=False,
                  highlight=False)
    details = next((r.details for r in results if r.details), [])
    for line in details[:1]:
        for part in line.splitlines()[-40:]:
            console.print(f"    {part}", markup=False, highlight=False)
    render_worker_output(console, results[:1])
    render_integrity(console, "test", [], info)
    console.print(f"[red]0 of {len(results)} cases passed[/red]")


def render_worker_output(console, results: list[CaseResult], lines: int = 20):
    """What the submission printed, under its case (already stripped of control characters and capped)."""
    for r in results:
        if r.output.strip():
            shown = r.output.splitlines()
            console.print(f"case {r.index}: the submission printed:", style="dim", markup=False, highlight=False)
            for line in shown[:lines]:
                console.print(f"  | {line[:300]}", style="dim", markup=False, highlight=False)
            if len(shown) > lines:
                console.print(f"  | ... {len(shown) - lines} more lines", style="dim", markup=False)


def render_integrity(console, mode: str, results: list[CaseResult], info: RunInfo):
    """Integrity flags (docs/integrity.md): run-time warnings, static hints, and the isolation in force."""
    if mode not in ("benchmark", "leaderboard"):          # those modes print their warnings with the table
        for r in results:
            for warning in r.warnings:
                console.print(f"⚠ case {r.index}: {warning}", style="yellow", markup=False, highlight=False)
    static = info.static_warnings
    if static:
        console.print("static checks (hints for a reviewer, not verdicts):", style="yellow")
        for f in static:
            console.print(f"  ⚠ [{f['code']}] {f['message']} (line {_lines(f['lines'])})", style="yellow",
                          markup=False, highlight=False)
    isolation = info.integrity
    if isolation:
        parent = ", ".join(isolation.get("parent") or []) or "no parent hardening"
        console.print(f"isolation: worker {isolation.get('worker')}; {parent}", style="dim", markup=False,
                      highlight=False)
    for notice in info.notices:
        console.print(f"notice: {notice}", style="yellow", markup=False, highlight=False)
    if info.refused:
        console.print(f"✘ {info.refused}", style="red", markup=False, highlight=False)


def warm_up(mode: str):
    """Render every kind of report once into memory before the worker starts, so that whatever rich and
    json load lazily is loaded now: the parent must import nothing once the submission runs."""
    import io
    from rich.console import Console
    from arena.clock import timing
    stats = timing.summarize([1000.0, 1100.0, 1200.0])
    predicted = {"b200_us": 10.0, "low_us": 8.0, "high_us": 12.5, "rests_on": "r", "bound": "DRAM", "dram_us": 5.0,
                 "sm_us": 4.0, "mma_us_per_cta": 1.0, "tma_us_per_cta": 2.0, "waves": 1, "ctas": 148}
    fake = [CaseResult(index=0, spec="m: 1", passed=True, message="ok", stats=stats, sol_us=1.0, output="x",
                       prediction=predicted),
            CaseResult(index=1, spec="m: 2", passed=False, error="wrong ✘ µ ±", details=["ERROR AT (0, 0)"],
                       diagnosis="d", evidence=["e"], warnings=["w"], output="y")]
    info = RunInfo(machine={"gpu": None, "torch": "", "python": ""}, wall_s={}, integrity={"parent": ["p"], "worker": "w"},
                   static_warnings=[{"code": "c", "message": "m", "lines": [1]}], notices=["n"], refused="r")
    for shown_mode in ("test", "benchmark", "profile", "leaderboard", "predict"):
        for width, terminal in ((140, False), (80, True)):
            console = Console(file=io.StringIO(), width=width, force_terminal=terminal, color_system="truecolor")
            render(console, shown_mode, fake, info, {0: "table"})
        popcorn_lines(shown_mode, fake, {0: "table"})
    json.dumps([r.as_dict() for r in fake], default=str)
    del mode


def _lines(numbers: list) -> str:
    return ", ".join(str(n) for n in numbers[:5]) + (" ..." if len(numbers) > 5 else "")


def echo_integrity(results: list[CaseResult], static: list, isolation: dict | None = None,
                   notices: list | None = None):
    """With POPCORN_FD the result lines must stay exactly official: integrity flags go to stderr."""
    import sys
    for notice in notices or []:
        print(f"notice: {notice}", file=sys.stderr)
    for r in results:
        if r.output.strip():
            print(f"case {r.index}: the submission printed:\n" + "\n".join(
                "  | " + line[:300] for line in r.output.splitlines()[:20]), file=sys.stderr)
    if isolation:
        parent = ", ".join(isolation.get("parent") or []) or "no parent hardening"
        print(f"isolation: worker {isolation.get('worker')}; {parent}", file=sys.stderr)
    for r in results:
        for warning in r.warnings:
            print(f"warning: case {r.index}: {warning}", file=sys.stderr)
    for f in static:
        print(f"static check: {f}", file=sys.stderr)


# ---- eval.py diagnose ---------------------------------------------------------------------------------

def render_probes(console, spec: str, results: list[ProbeResult], not_gemm: bool = False, diagnosis: str = ""):
    """One case of `eval.py diagnose`: each probe with its lines, the count, and the probe that explains it."""
    console.print(f"[bold]diagnose[/bold] {escape(spec)}")
    if not_gemm:
        console.print("[dim]structured GEMM probes exist for the nvfp4_gemm contract only; this task gets the "
                      "random case with its diagnosis, the probes its reference.py names (PROBES), and the repeat probe (group "
                      "GEMM: also guard rows past M)[/dim]")
    for r in results:
        mark = "[green]✔[/green]" if r.ok else "[red]✘[/red]"
        console.print(f"{mark} [bold]{r.name}[/bold]: ", end="")
        console.print(r.headline, markup=False, highlight=False)
        for line in r.lines:
            console.print(f"    {line}", markup=False, highlight=False)
    passed = sum(r.ok for r in results)
    colour = "green" if passed == len(results) else "red"
    console.print(f"[{colour}]{passed} of {len(results)} probes passed[/{colour}]")
    if diagnosis:
        console.print(f"diagnosis: {diagnosis}", markup=False, highlight=False)




def render_diagnose_report(console, results, reports):
    """The terminal report of `eval.py diagnose` (one block of probes per case)."""
    for r in results:
        probes = [ProbeResult(**p) for p in (reports or {}).get(r.index, [])]
        if not probes:
            console.print(f"✘ {r.spec}: {r.error}", style="red", markup=False, highlight=False)
            continue
        render_probes(console, r.spec, probes, not_gemm=not any(p.name.startswith("all ones") for p in probes),
                      diagnosis=r.diagnosis)
