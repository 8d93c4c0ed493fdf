"""Live progress (arena/report/progress.py) and the visual report (arena/report/figures.py, arena/report/html_report.py), tested as a
person meets them: eval.py as a real subprocess with stderr a pipe (plain lines) or a pseudo-terminal (the live
line), the PNG maps decoded pixel by pixel (Pillow), the SVG charts' text read as XML, and the HTML report
rendered by headless Chromium."""
import io
import os
import re
import shutil
import subprocess
import sys
from xml.etree import ElementTree

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from arena.report import figures  # noqa: E402
from tests.evalrun import run_eval, run_on_terminal, spec_file  # noqa: E402

BROKEN = os.path.join(ROOT, "tests", "broken")
GROUP_TASK = os.path.join(ROOT, "tasks", "nvfp4_group_gemm")
TAIL_SPEC = "m: 128; n: 384; k: 256; l: 1; seed: 6\nm: 256; n: 256; k: 512; l: 1; seed: 3\n"


def decode_png(data: bytes):
    """(width, height, rows of (r, g, b) tuples) of a PNG, read with Pillow."""
    from PIL import Image
    image = Image.open(io.BytesIO(data)).convert("RGB")
    width, height = image.size
    raw = image.tobytes()
    return width, height, [[tuple(raw[(y * width + x) * 3:(y * width + x) * 3 + 3]) for x in range(width)]
                           for y in range(height)]


def svg_texts(svg: str) -> list[str]:
    """The text elements of an SVG (which must parse as XML)."""
    root = ElementTree.fromstring(svg)
    return [t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text")]


# ---- progress ---------------------------------------------------------------------------------------

def test_plain_progress_goes_to_stderr_only_and_quiet_turns_it_off():
    spec = spec_file(TAIL_SPEC)
    run = run_eval("test", spec, "--submission", os.path.join(BROKEN, "tail_unwritten.py"))
    assert run.code == 112
    lines = [line for line in run.stderr.splitlines() if line.startswith("[arena]")]
    assert lines[0].startswith("[arena] starting the worker, importing tail_unwritten.py"), run.stderr
    assert all(": generating inputs" not in line for line in lines if "(" in line.rsplit(":", 1)[-1]), lines
    assert any(line.startswith("[arena] case 0: FAIL: 16384 output elements") for line in lines), lines
    assert "[arena] case 1: pass" in lines and lines[-1].startswith("[arena] 1 of 2 cases passed in ")
    assert "[arena]" not in run.stdout
    quiet = run_eval("test", spec, "--submission", os.path.join(BROKEN, "tail_unwritten.py"), "--quiet")
    assert quiet.code == 112 and "[arena]" not in quiet.stderr + quiet.stdout


def test_progress_never_enters_the_popcorn_lines():
    run = run_eval("test", spec_file(TAIL_SPEC), "--submission", os.path.join(BROKEN, "tail_unwritten.py"),
                   popcorn=True)
    assert run.code == 112
    assert "[arena]" not in run.raw and "[arena] case 1: pass" in run.stderr
    assert [line.split(":")[0] for line in run.raw.splitlines()][:2] == ["test-count", "test.0.spec"]


def test_a_long_stage_repeats_its_plain_line_with_the_time_so_far(tmp_path):
    slow = tmp_path / "slow.py"
    slow.write_text("import time\nfrom submissions.torch_reference import custom_kernel as _right\n\n\n"
                    "def custom_kernel(data):\n    time.sleep(2.5)\n    return _right(data)\n")
    run = run_eval("test", spec_file("m: 128; n: 256; k: 256; l: 1; seed: 1\n"), "--submission", str(slow),
                   env={"ARENA_PROGRESS_EVERY_S": "0.5", "PYTHONPATH": ROOT})
    assert run.code == 0, run.stderr[-2000:]
    repeats = re.findall(r"\[arena\] case 0 \(1/1\) [^\n]*: running custom_kernel \((\d+) s\)", run.stderr)
    assert len(repeats) >= 2, run.stderr       # the 2.5 s call shows as it lasts


def test_on_a_terminal_the_progress_is_one_live_line_with_a_clock():
    """stderr a real pseudo-terminal: rich redraws one line (carriage returns / cursor moves), with the
    stage and its elapsed seconds; the report on stdout stays plain."""
    code, text, stdout = run_on_terminal(["test", spec_file(TAIL_SPEC), "--submission",
                                          os.path.join(BROKEN, "tail_unwritten.py")], timeout=240)
    assert code == 112
    assert "\x1b[" in text, text[-500:]                     # drawn with terminal control sequences
    assert re.search(r"case 0 \(1/2\)[^\n\r]*: [a-z]", text), text[-1500:]
    assert re.search(r"\d+ s", text)
    assert "case 0: FAIL" in text and "1 of 2 cases passed" in text
    assert "[arena]" not in stdout and "case" in stdout


# ---- the pictures -----------------------------------------------------------------------------------

def test_png_encoder_round_trips():
    import torch
    image = torch.randint(0, 256, (7, 5, 3), dtype=torch.uint8)
    width, height, rows = decode_png(figures.png(image))
    assert (width, height) == (5, 7)
    assert rows == [[tuple(image[y, x].tolist()) for x in range(5)] for y in range(7)]


def test_the_heatmap_of_an_unwritten_column_tile_shows_that_tile_and_only_it(tmp_path):
    plots = tmp_path / "plots"
    run = run_eval("test", spec_file(TAIL_SPEC), "--submission", os.path.join(BROKEN, "tail_unwritten.py"),
                   "--plots", str(plots), "--quiet")
    assert run.code == 112
    assert sorted(os.listdir(plots)) == ["case0_batch_0_error.png", "case0_batch_0_error.svg",
                                         "case0_batch_0_reference.png", "case0_batch_0_reference.svg"]
    width, height, rows = decode_png((plots / "case0_batch_0_error.png").read_bytes())
    assert (width, height) == (384, 128)            # 128 rows x 384 columns, one pixel per element
    titles = svg_texts((plots / "case0_batch_0_error.svg").read_text())
    assert titles[0] == "batch 0: |out − ref|, log scale, 128 rows × 384 columns", titles
    blue = {x for row in rows for x, c in enumerate(row) if c == figures.UNTOUCHED}
    assert blue == set(range(256, 384))             # the never-written tile, in its own colour
    assert all(c in (figures.EXACT, figures.WITHIN) for row in rows for c in row[:256])
    _, _, ref_rows = decode_png((plots / "case0_batch_0_reference.png").read_bytes())
    assert len({c for row in ref_rows for c in row}) > 20     # the reference's magnitude varies


def test_the_heatmap_of_a_group_with_an_unwritten_tail_shows_the_tail_rows(tmp_path):
    plots = tmp_path / "plots"
    run = run_eval("test", spec_file("m: [200, 128]; n: [256, 128]; k: [256, 256]; g: 2; seed: 7\n"), "--task",
                   GROUP_TASK, "--submission", os.path.join(BROKEN, "group_tail_unwritten.py"), "--plots", str(plots),
                   "--quiet")
    assert run.code == 112
    name = "case0_group_0_200x256x256_error.png"
    assert sorted(os.listdir(plots)) == [name, name.replace(".png", ".svg"), name.replace("error", "reference"),
                                         name.replace("error.png", "reference.svg")]
    width, height, rows = decode_png((plots / name).read_bytes())
    assert (width, height) == (256, 200)
    wrong_rows = {y for y, row in enumerate(rows) if any(c == figures.UNTOUCHED for c in row)}
    assert wrong_rows == set(range(128, 200))


# ---- the HTML report in a real browser ------------------------------------------------------------------

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def render(path: str, tmp_path, height: int) -> tuple[dict, tuple]:
    """Headless Chromium on the report: the body's attributes after load (--dump-dom) and a screenshot."""
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=3000"]
    dom = subprocess.run([CHROMIUM, *flags, "--dump-dom", f"file://{path}"], capture_output=True, text=True,
                         timeout=120).stdout
    shot = tmp_path / "shot.png"
    subprocess.run([CHROMIUM, *flags, f"--screenshot={shot}", f"--window-size=1200,{height}", f"file://{path}"],
                   capture_output=True, timeout=120)
    body = re.search(r"<body([^>]*)>", dom)
    attrs = dict(re.findall(r'([\w-]+)="([^"]*)"', body.group(1))) if body else {}
    return {"attrs": attrs, "dom": dom}, decode_png(shot.read_bytes())


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium here (Debian: apt-get install chromium)")
def test_the_report_of_a_failing_and_a_passing_run_renders_in_chromium(tmp_path):
    failing = tmp_path / "failing.html"
    run = run_eval("test", spec_file(TAIL_SPEC), "--submission", os.path.join(BROKEN, "tail_unwritten.py"),
                   "--report", str(failing), "--quiet")
    assert run.code == 112 and failing.exists()
    page, (width, height, rows) = render(str(failing), tmp_path, 1400)
    assert page["attrs"].get("data-images") == "2" and page["attrs"].get("data-images-decoded") == "2", page["attrs"]
    for needle in ('id="verdict"', 'id="case-0"', 'id="case-1"', "1 of 2 cases passed", "diagnosis:",
                   "never written (pre-filled c)"):
        assert needle in page["dom"], needle
    colours = {}
    for row in rows:
        for c in row:
            colours[c] = colours.get(c, 0) + 1
    assert len(colours) > 50                               # text, borders, pictures: not a blank page
    assert colours.get(figures.UNTOUCHED, 0) >= 128 * 128   # the unwritten tile, drawn at least 1:1

    passing = tmp_path / "passing.html"
    run = run_eval("benchmark", spec_file("m: 128; n: 256; k: 256; l: 1; seed: 1\n"), "--submission",
                   os.path.join(ROOT, "submissions", "torch_reference.py"), "--report", str(passing), "--max-runs", "20",
                   "--quiet")
    assert run.code == 0, run.stderr[-2000:]
    page, (width, height, rows) = render(str(passing), tmp_path, 900)
    assert page["attrs"].get("data-images-decoded") == page["attrs"].get("data-images") == "1", page["attrs"]
    assert "distribution of the" in page["dom"] and "mean ± err" in page["dom"]
    bars = sum(1 for row in rows for c in row if c == (60, 110, 200))
    assert bars > 50                                       # the histogram's bars are on screen


def test_a_report_or_plots_path_that_cannot_be_written_is_one_line_before_anything_runs(tmp_path):
    for option, path in (("--report", tmp_path / "missing" / "r.html"), ("--plots", tmp_path / "missing" / "p")):
        run = run_eval("test", spec_file(TAIL_SPEC), "--submission", os.path.join(BROKEN, "tail_unwritten.py"),
                       option, str(path), "--quiet")
        assert run.code == 2, run.stderr
        errors = [line for line in run.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and f"no folder {tmp_path / 'missing'}" in errors[0], run.stderr


@pytest.mark.parametrize("source, names", [
    ("import cutlass.cute as cute\n@cute.jit\ndef k(): pass\n", ["CuTe DSL kernels"]),
    ("import triton\n@triton.jit\ndef k(x): pass\n", ["Triton kernels"]),
    ("from torch.utils.cpp_extension import load_inline\nm = load_inline(name='gemm', cpp_sources='')\n", ["gemm"]),
    ("def custom_kernel(data):\n    return data[0]\n", []),
])
def test_jit_compiling_submissions_get_the_first_call_build_allowance(source, names):
    from arena.report.progress import extensions_built_by
    assert extensions_built_by(source) == names


def test_a_jit_submission_gets_the_build_allowance_on_each_case_first_call():
    from types import SimpleNamespace

    from arena.run.evaluator import Evaluator
    from arena.run.limits import BUILD_ALLOWANCE_S
    evaluator = object.__new__(Evaluator)
    evaluator.limits, evaluator.device = SimpleNamespace(case_timeout=None, emulated=False), "cpu"
    evaluator.builds, evaluator._answered, evaluator._seen_per_call = True, True, None
    evaluator.builds_per_shape = True              # CuTe DSL / Triton: a new shape compiles again
    assert evaluator.timeout([]) >= BUILD_ALLOWANCE_S
    evaluator._seen_per_call = 0.01                # the case's first call answered
    assert evaluator.timeout([]) < BUILD_ALLOWANCE_S
    evaluator.builds_per_shape, evaluator._seen_per_call = False, None   # load_inline: only the run's first call
    assert evaluator.timeout([]) < BUILD_ALLOWANCE_S
