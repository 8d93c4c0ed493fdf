"""The two timing methods (arena/timing.py): the competition's (N distinct inputs back to back per sample, the
span divided by N) and per-call; which one a task uses, what the JSON says, and that replays stay caught."""
import json
import time

import pytest

from arena import timing
from arena.taskdef import TaskError, load_task
from tests.evalrun import GOOD, ROOT, run_eval, spec_file

ONE = "m: 128; n: 256; k: 256; l: 1; seed: 1111\n"


def test_a_fixed_cost_per_window_is_paid_once_per_sample_not_per_call():
    """What the issue measured on an H100 (a per-call latency in every per-call sample), reproduced with a
    5 ms synchronization: per call it lands in every sample, back to back it is shared by the N calls."""
    def sync():
        time.sleep(0.005)
    inputs = list(range(10))
    outputs, per_call = timing.time_calls_wall(lambda x: x * 2, inputs, sync)
    _, together = timing.time_together_wall(lambda x: x * 2, inputs, sync)
    assert outputs == [x * 2 for x in inputs] and len(per_call) == 10 and len(together) == 1
    assert min(per_call) >= 4.5e6                       # each call alone pays the 5 ms
    assert together[0] < 1.5e6                          # ~5 ms / 10 per call


@pytest.mark.parametrize("folder,calls", [(None, 50), ("tasks/nvfp4_dual_gemm", 50),
                                          ("tasks/nvfp4_group_gemm", 15), ("tasks/nvfp4_gemv", 1)])
def test_each_task_declares_the_competitions_number_of_inputs_per_sample(folder, calls):
    assert load_task(f"{ROOT}/{folder}" if folder else None).competition_calls == calls


def test_a_bad_calls_per_sample_is_one_clear_task_error(tmp_path):
    for name in ("task.yml", "task.py", "reference.py", "utils.py"):
        (tmp_path / name).write_text(open(f"{ROOT}/{name}").read())
    text = (tmp_path / "task.yml").read_text().replace("calls_per_sample: 50", "calls_per_sample: 0")
    (tmp_path / "task.yml").write_text(text)
    with pytest.raises(TaskError, match="competition_timing.calls_per_sample must be an integer from 1 to 1000"):
        load_task(tmp_path)


def test_competition_timing_on_request_and_what_the_json_says(tmp_path):
    out = tmp_path / "result.json"
    run = run_eval("benchmark", spec_file(ONE), "--submission", GOOD, "--timing", "competition",
                   "--max-runs", "2", "--json", str(out))
    assert run.code == 0, run.stderr
    doc = json.loads(out.read_text())
    case = doc["cases"][0]
    assert case["timing"] == {"method": "competition", "calls_per_sample": 50}
    assert 1 <= case["stats"]["runs"] <= 2
    assert doc["units"]["cases[].stats"].startswith("ns per call") and doc["units"]["geomean_us"] == "us"
    assert "competition method, 50 distinct inputs back to back per sample" in run.stdout


def test_the_cpu_defaults_to_per_call(tmp_path):
    out = tmp_path / "result.json"
    run = run_eval("benchmark", spec_file(ONE), "--submission", GOOD, "--max-runs", "3", "--json", str(out))
    assert run.code == 0, run.stderr
    assert json.loads(out.read_text())["cases"][0]["timing"] == {"method": "per-call", "calls_per_sample": 1}


def test_a_replayed_result_is_still_caught_back_to_back(tmp_path):
    """One sample's 50 inputs are all fresh: a result cached per shape is the same memory twice."""
    run = run_eval("leaderboard", spec_file(ONE), "--submission", f"{ROOT}/tests/exploits/replay_shape.py",
                   "--timing", "competition", "--max-runs", "2", popcorn=True)
    assert run.code == 112
    assert "are the same memory" in run.keys.get("benchmark.0.error", ""), run.raw
