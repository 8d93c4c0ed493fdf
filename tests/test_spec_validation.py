"""Spec values are checked against the task (task.yml `case_rules`) before anything runs: a bad spec file or
task.yml case exits 113 with one line naming the case and the problem, never a traceback, never 112.
Each case here is a real `python eval.py test SPECFILE` subprocess."""
import shutil

import pytest

from arena.taskdef.specs import check_case
from tests.evalrun import ROOT, run_eval, spec_file

GEMM = ROOT
GEMV = f"{ROOT}/tasks/nvfp4_gemv"
GROUP = f"{ROOT}/tasks/nvfp4_group_gemm"

BAD = [
    (GEMM, "m: 128; n: 256; k: 100; l: 1; seed: 1", "k must be a multiple of 256, got 100"),
    (GEMM, "m: abc; n: 256; k: 256; l: 1; seed: 1", "m must be an integer, got 'abc'"),
    (GEMM, "m: 128; k: 256; l: 1; seed: 1", "missing n"),
    (GEMM, "m: 128; n: 256; k: 256; l: 1; seed: 1; x: 3", "unknown key 'x' (this task takes m, n, k, l, seed, "
                                                         "data (optional))"),
    (GEMM, "m: -128; n: 256; k: 256; l: 1; seed: 1", "m must be at least 1, got -128"),
    (GEMM, "m: 128; n: 256; k: 256; l: 0; seed: 1", "l must be at least 1, got 0"),
    (GEMM, "m: 128; n: 256; k: 256; l: 1; seed: -5", "seed must be at least 0, got -5"),
    (GEMM, "m: 128; n: 256; k: 256; l: 1; seed: 1; data: gaussian",
     "data must be one of official, allcodes, quantized, got 'gaussian'"),
    (GEMM, "m: [128, 256]; n: 256; k: 256; l: 1; seed: 1", "m must be an integer, got (128, 256)"),
    (GEMV, "m: 128; k: 100; l: 1; seed: 1", "k must be a multiple of 64, got 100"),
    (GEMV, "m: 128; n: 1; k: 128; l: 1; seed: 1", "unknown key 'n'"),
    (GROUP, "m: [128]; n: [256, 256]; k: [256, 256]; g: 2; seed: 1", "m must list 2 values (g = 2), got 1"),
    (GROUP, "m: 128; n: [256]; k: [256]; g: 1; seed: 1", "m must be a list with one integer per group"),
    (GROUP, "m: [128, 64]; n: [256, 256]; k: [256, 300]; g: 2; seed: 1", "k[1] must be a multiple of 256, got 300"),
]


def one_error_line(run) -> str:
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert "Traceback" not in run.stderr and len(lines) == 1, run.stderr
    return lines[0]


@pytest.mark.parametrize("task, spec, problem", BAD)
def test_a_bad_spec_file_exits_113_with_one_line(task, spec, problem):
    path = spec_file("m: 128; n: 256; k: 256; l: 1; seed: 1\n\n" + spec + "\n" if task == GEMM else spec + "\n")
    run = run_eval("test", path, "--task", task, "--submission", f"{ROOT}/submissions/torch_reference.py",
                   popcorn=True, timeout=120)
    assert run.code == 113, run.stderr
    line = one_error_line(run)
    assert line.startswith(f"error: spec file {path}, case ") and problem in line and spec in line, line


def test_the_case_number_counts_cases_not_lines():
    path = spec_file("m: 128; n: 256; k: 256; l: 1; seed: 1\n\nm: 128; n: 256; k: 100; l: 1; seed: 1\n")
    run = run_eval("test", path, "--submission", f"{ROOT}/submissions/torch_reference.py", timeout=120)
    assert run.code == 113 and "case 1 (m: 128; n: 256; k: 100; l: 1; seed: 1)" in one_error_line(run)


def test_a_bad_task_yml_case_exits_113_naming_the_list_and_case(tmp_path):
    folder = tmp_path / "task"
    shutil.copytree(GEMV, folder)
    yml = folder / "task.yml"
    text = yml.read_text()
    yml.write_text(text.replace('  - {"m": 128, "k": 1536, "l": 1, "seed": 1111}',
                                '  - {"m": 128, "k": 1000, "l": 1, "seed": 1111}', 1))
    run = run_eval("test", "--task", str(folder), "--submission", f"{folder}/torch_submission.py", timeout=120)
    assert run.code == 113
    line = one_error_line(run)
    assert "task.yml `tests`, case 1" in line and "k must be a multiple of 64, got 1000" in line, line


@pytest.mark.parametrize("line, named", [
    ("expect_mma: false", "expect_mma: \"no\""),
    ("competition_timing: {calls_per_sample: 1}", "competition_timing: {calls_per_sample: 0}"),
    ("speed_of_light_us: [8.622, 17.275, 4.317]", "speed_of_light_us: [8.622, fast, 4.317]"),
])
def test_a_bad_task_yml_field_is_one_line_naming_the_field(tmp_path, line, named):
    """task.yml's fields are typed when the task loads (arena/taskdef/definition.py TaskConfig): a wrong one
    is one error line naming it, not a traceback from wherever it is read first."""
    from arena.taskdef.definition import TaskError, load_task
    folder = tmp_path / "task"
    shutil.copytree(GEMV, folder)
    yml = folder / "task.yml"
    assert line in yml.read_text()
    yml.write_text(yml.read_text().replace(line, named, 1))
    field = named.split(":")[0]
    with pytest.raises(TaskError, match=f"task.yml: .*{field}"):
        load_task(folder)


def test_the_shipped_case_lists_obey_their_rules():
    from arena.taskdef.definition import load_task
    for folder in (GEMM, GEMV, GROUP, f"{ROOT}/tasks/nvfp4_dual_gemm"):
        task = load_task(folder)
        assert task.config.case_rules, folder
        for which in ("tests", "benchmarks", "robustness"):
            task.cases(which)       # raises on a broken case


def test_rules_accept_the_official_grammars():
    rules = {"m": {"type": "ints", "min": 1, "per": "g"}, "g": {"type": "int", "min": 1},
             "seed": {"type": "int", "min": 0}, "data": {"type": "word", "one_of": ["official"], "optional": True}}
    assert check_case({"m": (96, 128), "g": 2, "seed": 1111}, rules) is None
    assert check_case({"m": (96, 128), "g": 2, "seed": 1111, "data": "official"}, rules) is None
    assert check_case({"m": (96, True), "g": 2, "seed": 1}, rules) == "m[1] must be an integer, got True"
