"""Group GEMM diagnosis (arena/diagnose/groups.py, the guard-row probe): each group bug in tests/broken/group_*.py
is named, honest group submissions stay quiet. Unit tests call the diagnosis on tensors; end-to-end runs of
eval.py as a real subprocess check the reports and the probe through the real worker."""
import os
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TASK = os.path.join(ROOT, "tasks", "nvfp4_group_gemm")
BROKEN = os.path.join(ROOT, "tests", "broken")
for path in (ROOT, BROKEN):
    if path not in sys.path:
        sys.path.append(path)

from arena.diagnose import diagnose_groups, explain_failure, is_group_contract  # noqa: E402
from arena.taskdef.nested import clone_data, copy_storages  # noqa: E402
from tests.evalrun import run_eval, spec_file  # noqa: E402
from tests.fileload import load_file  # noqa: E402
from tests.taskload import task_reference  # noqa: E402

pytestmark = pytest.mark.slow     # real group GEMM evaluations: `pytest -m slow`

SAME_SHAPES = dict(m=[128, 96, 64, 128], n=[256] * 4, k=[256] * 4, g=4, seed=5)
MIXED = dict(m=[40, 56, 384, 512], n=[512, 384, 256, 128], k=[256] * 4, g=4, seed=1111)
TAILS = dict(m=[200, 72, 128], n=[256, 128, 384], k=[256, 512, 256], g=3, seed=7)


@pytest.fixture(scope="module")
def reference():
    """The group task's reference, imported with its own task.py (`from task import ...`); the top-level
    modules are put back afterwards for the other tests."""
    with task_reference(TASK) as module:
        yield module


def run_case(reference, name: str, args: dict):
    data = reference.generate_input(**args)
    out = load_file(os.path.join(BROKEN, name + ".py"), "sub_" + name).custom_kernel(clone_data(data))
    good, _ = reference.check_implementation(data, out)
    return good, explain_failure(reference, data, out, lambda: reference.generate_input(**args))


FIRES = [
    ("group_exchanged", SAME_SHAPES, "groups_exchanged", "group 0 holds group 1's result"),
    ("group_exchanged", MIXED, "groups_exchanged", "group 3 holds group 0's result"),
    ("group_wrong_a", SAME_SHAPES, "group_operand_A", "group 2 multiplies group 3's A"),
    ("group_wrong_a", MIXED, "group_operand_A", "group 1 multiplies group 2's A"),
    ("group_tail_unwritten", TAILS, "group_tails_unwritten", "group 0 (200x256x256): rows 128-199"),
    ("group_layout_last", SAME_SHAPES, "kgroup_swapped", "group 3 (128x256x256); groups 0, 1, 2 are right"),
    ("group_layout_last", TAILS, "kgroup_swapped", "group 2 (128x384x256); groups 0, 1 are right"),
]


@pytest.mark.parametrize("name,args,key,phrase", FIRES, ids=[f"{f[0]}-{i}" for i, f in enumerate(FIRES)])
def test_each_group_bug_gets_its_diagnosis(reference, name, args, key, phrase):
    good, found = run_case(reference, name, args)
    assert not good
    assert found is not None and found.hypothesis == key, found
    assert phrase in found.summary, found.summary


def test_an_irregular_tail_names_only_the_tail_rows_and_the_fix(reference):
    _, found = run_case(reference, "group_tail_unwritten", TAILS)
    assert "still hold the pre-filled c" in found.summary and "ceil(M/128)" in found.summary
    assert "group 1 (72x128x512): rows 0-71, the whole group as M < 128" in found.summary
    assert "group 2" not in found.summary        # M = 128: no tail, written in full
    assert any(line.startswith("wrong groups: 2 of 3") for line in found.evidence), found.evidence


def test_a_wrong_group_gets_its_own_anatomy_and_tile_map(reference):
    _, found = run_case(reference, "group_layout_last", SAME_SHAPES)
    assert any("output tiles" in line for line in found.evidence), found.evidence
    assert any(line.startswith("wrong groups: 1 of 4 (group 3") for line in found.evidence)


@pytest.mark.parametrize("name", ["group_honest_blocked", "group_rows_beyond_m"])
@pytest.mark.parametrize("args", [SAME_SHAPES, MIXED, TAILS])
def test_honest_group_outputs_pass_and_get_no_diagnosis(reference, name, args):
    data = reference.generate_input(**args)
    out = load_file(os.path.join(BROKEN, name + ".py"), "sub_" + name).custom_kernel(clone_data(data))
    assert reference.check_implementation(data, out) == (True, "")
    expected = reference.ref_kernel(clone_data(reference.generate_input(**args)))
    assert diagnose_groups(data, out, expected) is None


def test_the_group_contract_is_recognised_and_nothing_else(reference):
    data = reference.generate_input(**TAILS)
    assert is_group_contract(data)
    assert not is_group_contract(data[0]) and not is_group_contract((data[0], data[1], data[2][:1], data[3]))
    assert not is_group_contract(tuple(torch.zeros(2) for _ in range(7)))


def test_storage_copies_keep_memory_past_a_view_and_shared_storage():
    buffer = torch.arange(20, dtype=torch.float16)
    head, tail = buffer[:8].view(4, 2), buffer[8:]
    head_copy, tail_copy = copy_storages((head, [tail]))[0], copy_storages((head, [tail]))[1][0]
    assert head_copy.untyped_storage().nbytes() == buffer.untyped_storage().nbytes()
    assert head_copy.data_ptr() != head.data_ptr() and torch.equal(head_copy, head)
    assert torch.equal(tail_copy, tail) and tail_copy.storage_offset() == 8
    pair = copy_storages([head, tail])
    assert pair[0].untyped_storage().data_ptr() == pair[1].untyped_storage().data_ptr()   # still one memory


# ---- end to end: eval.py as a real subprocess ----------------------------------------------------------

ONE_CASE = "m: [200, 72]; n: [256, 128]; k: [256, 512]; g: 2; seed: 3\n"


def test_diagnose_mode_catches_rows_written_past_m_that_the_test_cannot_see():
    spec = spec_file(ONE_CASE)
    test = run_eval("test", spec, "--task", TASK, "--submission", os.path.join(BROKEN, "group_rows_beyond_m.py"))
    assert test.code == 0, test.stderr[-2000:]          # every value it returns is right
    run = run_eval("diagnose", spec, "--task", TASK, "--submission", os.path.join(BROKEN, "group_rows_beyond_m.py"))
    assert run.code == 112, run.stderr[-2000:]
    text = " ".join(run.stdout.split())
    assert "2 of 2 groups write rows past their M" in text, text[-2000:]
    assert "group 0 (M = 200): rows 200-255 written past the end of c (56 rows" in text
    assert "group 1 (M = 72): rows 72-127 written past the end of c" in text


def test_diagnose_mode_passes_an_honest_group_submission_and_names_a_group_bug():
    spec = spec_file(ONE_CASE)
    honest = run_eval("diagnose", spec, "--task", TASK, "--submission", os.path.join(TASK, "torch_submission.py"))
    assert honest.code == 0, honest.stdout[-2000:] + honest.stderr[-2000:]
    assert "no row past any group's M was written" in honest.stdout
    broken = run_eval("diagnose", spec, "--task", TASK, "--submission", os.path.join(BROKEN, "group_exchanged.py"))
    assert broken.code == 112
    assert "diagnosis: random case" in broken.stdout and "Groups exchanged" in broken.stdout


def test_test_mode_diagnoses_groups_left_unwritten_in_the_report_and_json():
    run = run_eval("test", spec_file(ONE_CASE), "--task", TASK, "--submission",
                   os.path.join(BROKEN, "group_tail_unwritten.py"), json_report=True)
    assert run.code == 112, run.stderr[-2000:]
    case = run.doc["cases"][0]
    assert case["error"].startswith("custom_kernel returned the input c unchanged (data[0][1][2]")
    assert "Only the irregular-M tails are wrong" in case["diagnosis"]
    assert "group 0 (200x256x256): rows 128-199" in case["diagnosis"]
    assert "diagnosis: Only the irregular-M tails" in run.stdout


@pytest.mark.gpu
def test_guard_rows_travel_to_a_gpu_worker_and_back():
    """On a GPU the parent copies the inputs before the worker maps them: the copy must keep the guard rows."""
    run = run_eval("diagnose", spec_file(ONE_CASE), "--task", TASK, "--submission",
                   os.path.join(BROKEN, "group_rows_beyond_m.py"), timeout=600)
    assert run.code == 112, run.stderr[-2000:]
    assert "2 of 2 groups write rows past their M" in " ".join(run.stdout.split())


def test_the_guard_probe_says_when_it_could_not_look(reference):
    """A submission that returns new tensors instead of the c it was given: the guard rows cannot be read, and
    the probe says so instead of claiming nothing was written."""
    from arena.diagnose.probes import probe_group_bounds
    fresh_outputs = lambda data: [c.clone() for _, _, c in data[0]]        # noqa: E731
    found = probe_group_bounds(fresh_outputs, lambda: reference.generate_input(**TAILS))
    assert found.ok and found.headline == "not checked: no group returned the c it was given"
    assert found.lines == ["group(s) 0, 1, 2 returned a new tensor instead of their c: not checked"]
