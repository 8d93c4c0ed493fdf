"""arena/taskdef/checking.py: the structured result the evaluator reads, and the competition's (passed, message) pair
built from it; a task's own check_implementation (a plain function) still reports as one line."""
import torch

from arena.taskdef.checking import CheckResult, ReferenceCheck, make_match_reference
from tests.evalrun import GOOD, ROOT, run_eval, spec_file


def doubled(data):
    return data * 2


def test_mismatches_are_lines_and_the_competition_message_joins_them():
    check = make_match_reference(doubled, rtol=1e-3, atol=1e-3)
    assert isinstance(check, ReferenceCheck) and (check.rtol, check.atol) == (1e-3, 1e-3)
    data = torch.arange(8, dtype=torch.float32)
    wrong = data * 2
    wrong[[1, 5]] += 1
    result = check.compare(data, wrong)
    assert result == CheckResult(False, mismatches=["Number of mismatched elements: 2",
                                                    "ERROR AT (1,): 3.0 2.0", "ERROR AT (5,): 11.0 10.0"])
    assert check(data, wrong) == (False, "mismatch found! custom implementation doesn't match reference: "
                                         "Number of mismatched elements: 2 ERROR AT (1,): 3.0 2.0 "
                                         "ERROR AT (5,): 11.0 10.0")
    assert check(data, data * 2) == (True, "")
    lenient = check.compare(data, (data * 2).half())
    assert lenient.passed and lenient.warnings == [
        "output dtype is torch.float16, expected torch.float32: compared by value, as the competition does "
        "(--strict refuses it)"]
    assert check.compare(data, (data * 2).half(), strict=True).problem.startswith(
        "output dtype is torch.float16, expected torch.float32 (its values match the reference")
    assert check.compare(data, (data * 3).half()).mismatches[0] == "Number of mismatched elements: 7"


def test_a_group_mismatch_names_its_group():
    check = make_match_reference(lambda data: [t * 2 for t in data], rtol=1e-3, atol=1e-3)
    data = [torch.ones(2), torch.ones(3)]
    result = check.compare(data, [torch.full((2,), 2.0), torch.zeros(3)])
    assert (result.passed, result.group, result.mismatches[0]) == (False, 1, "Number of mismatched elements: 3")
    assert "doesn't match reference: group 1: Number of mismatched elements: 3" in result.competition_message()


def test_a_tasks_own_check_function_is_reported_as_one_line(tmp_path):
    """A reference.py whose check_implementation is a plain function returning (bool, str), as a task from
    elsewhere may have: its message arrives whole, on one line."""
    for name in ("task.yml", "task.py", "utils.py", "reference.py"):
        (tmp_path / name).write_text(open(f"{ROOT}/{name}").read())
    with open(tmp_path / "reference.py", "a") as f:
        f.write("\n\ndef check_implementation(data, output):\n"
                "    return False, 'my own check says no\\nsecond line'\n")
    run = run_eval("test", spec_file("m: 128; n: 256; k: 256; l: 1; seed: 1\n"), "--submission", GOOD,
                   "--task", str(tmp_path), popcorn=True)
    assert run.code == 112 and run.keys["test.0.error"] == "my own check says no second line", run.keys


def _task_copy(tmp_path, tolerance: str):
    for name in ("task.yml", "task.py", "utils.py", "reference.py"):
        (tmp_path / name).write_text(open(f"{ROOT}/{name}").read())
    text = (tmp_path / "task.yml").read_text()
    line = next(x for x in text.splitlines() if x.startswith("tolerance:"))
    (tmp_path / "task.yml").write_text(text.replace(line, f"tolerance: {tolerance}"))


def test_the_tolerance_lives_in_task_yml_and_the_check_and_the_diagnosis_read_it(tmp_path, monkeypatch):
    from arena.diagnose import explain
    from arena.taskdef.definition import load_task
    _task_copy(tmp_path, '{"rtol": 0.5, "atol": 0.25}')
    task = load_task(tmp_path)
    reference = task.import_reference()
    assert task.tolerance == {"rtol": 0.5, "atol": 0.25}
    assert (reference.check_implementation.rtol, reference.check_implementation.atol) == (0.5, 0.25)
    # a result 30% off passes under rtol 0.5 (and would fail under the shipped 1e-3)
    data = reference.generate_input(m=128, n=256, k=256, l=1, seed=3)
    expected = reference.ref_kernel(tuple(t.clone() for t in data))
    assert reference.check_implementation(data, (expected.float() * 1.3).half()) == (True, "")
    seen = {}
    monkeypatch.setattr(explain, "diagnose", lambda *args: seen.update(rtol=args[-2], atol=args[-1]))
    explain.explain_failure(reference, data, expected * 3)
    assert seen == {"rtol": 0.5, "atol": 0.25}


def test_a_bad_tolerance_is_one_clear_line(tmp_path):
    _task_copy(tmp_path, '{"rtol": "loose"}')
    run = run_eval("test", spec_file("m: 128; n: 256; k: 256; l: 1; seed: 1\n"), "--submission", GOOD,
                   "--task", str(tmp_path))
    assert run.code == 113, run.stderr
    assert "tolerance must be {rtol: NUMBER, atol: NUMBER} (both >= 0), got {'rtol': 'loose'}" in \
        run.stderr.strip().splitlines()[-1]
