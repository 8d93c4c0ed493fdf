"""The two timing methods (arena/clock/timing.py): the competition's (N distinct inputs back to back per sample, the
span divided by N) and per-call; which one a task uses, what the JSON says, and that replays stay caught."""
import json
import time

import pytest
import torch

from arena.clock import gpustate, timing
from arena.taskdef.definition import TaskError, load_task
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
    assert {k: case["timing"][k] for k in ("method", "calls_per_sample")} == {"method": "competition",
                                                                             "calls_per_sample": 50}
    if torch.cuda.is_available():       # the clocks NVML saw during the timing, and the line saying them
        assert case["timing"]["gpu"]["sm_mhz_max"] >= case["timing"]["gpu"]["sm_mhz_min"] > 0
        assert "GPU during timing: SM" in run.stdout
    assert 1 <= case["stats"]["runs"] <= 2
    # One clean worker's empty window beside every counted window, and the parent's own clock per call.
    assert len(case["timing"]["empty_ns"]) == case["stats"]["runs"] and min(case["timing"]["empty_ns"]) > 0
    assert case["timing"]["parent_clock_ns_per_call"] > 0
    assert doc["units"]["cases[].stats"].startswith("ns per call") and doc["units"]["geomean_us"] == "us"
    assert "competition method, 50 distinct inputs back to back per sample" in run.stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU run defaults to the competition method")
def test_the_cpu_defaults_to_per_call(tmp_path):
    out = tmp_path / "result.json"
    run = run_eval("benchmark", spec_file(ONE), "--submission", GOOD, "--max-runs", "3", "--json", str(out))
    assert run.code == 0, run.stderr
    timing_json = json.loads(out.read_text())["cases"][0]["timing"]
    assert {k: timing_json[k] for k in ("method", "calls_per_sample")} == {"method": "per-call", "calls_per_sample": 1}
    assert timing_json["harness_s"]["timing_loop"] >= timing_json["harness_s"]["worker"] > 0
    assert len(timing_json["empty_ns"]) >= 1 and min(timing_json["empty_ns"]) > 0     # empty calls did run


def test_a_replayed_result_is_still_caught_back_to_back(tmp_path):
    """Every timed input is fresh: a result cached per shape is wrong from the first timed call on (the
    uncounted warm-up call), and would be the same memory twice within a sample."""
    run = run_eval("leaderboard", spec_file(ONE), "--submission", f"{ROOT}/tests/exploits/replay_shape.py",
                   "--timing", "competition", "--max-runs", "2", popcorn=True)
    assert run.code == 112
    error = run.keys.get("benchmark.0.error", "")
    assert "a timed output is wrong" in error or "are the same memory" in error, run.raw


class FakeNvml:
    """NVML's calls as pynvml names them, replaying a list of (SM MHz, reasons, violation ns) readings."""
    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 0, 1, 0
    NVML_PERF_POLICY_POWER, NVML_PERF_POLICY_THERMAL = 0, 1

    def __init__(self, readings):
        self.readings, self.at = readings, -1

    def nvmlDeviceGetClockInfo(self, handle, clock):
        if clock == self.NVML_CLOCK_SM:
            self.at += 1
            return self.readings[self.at][0]
        return 2619

    def nvmlDeviceGetPowerUsage(self, handle):
        return 400_000

    def nvmlDeviceGetTemperature(self, handle, sensor):
        return 50

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle):
        return self.readings[self.at][1]

    def nvmlDeviceGetViolationStatus(self, handle, policy):
        class Violation:
            violationTime = self.readings[self.at][2] if policy == self.NVML_PERF_POLICY_POWER else 0
        return Violation


def clocks_of(readings, window_ms=100.0):
    monitor = gpustate.GpuMonitor(FakeNvml(readings), handle=None)
    return gpustate.summarize([monitor.read() for _ in readings], window_ms)


def test_steady_clocks_raise_no_warning():
    clocks = clocks_of([(1980, 0x1, 0), (1980, 0x0, 0), (1965, 0x1, 0)])
    assert (clocks.sm_mhz_min, clocks.sm_mhz_max, clocks.reasons_seen) == (1965, 1980, [])
    assert clocks.warnings() == []


def test_a_clock_that_moved_during_timing_is_said():
    warnings = clocks_of([(1980, 0, 0), (1980, 0, 0), (1410, 0, 0)]).warnings()
    assert len(warnings) == 1 and "moved between 1410 and 1980 MHz" in warnings[0]


def test_power_capping_during_timing_is_said_with_how_long():
    clocks = clocks_of([(1755, 0, 0), (1755, 0x4, 20_000_000), (1755, 0x4, 30_000_000)])
    assert clocks.reasons_seen == ["sw-power-cap"] and clocks.limited_ms == 30.0
    assert any("slowed during timing (sw-power-cap; 30 of 100 ms held down)" in w for w in clocks.warnings())


def test_no_nvml_means_no_reading_and_no_error():
    assert gpustate.summarize([], 10.0) is None
    assert gpustate.GpuMonitor.open(99) is None       # no such device (or no NVML on this machine)




@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU's budget")
def test_a_cpu_benchmark_of_slow_calls_fits_its_calls_to_the_budget(tmp_path):
    """Calls of a second against a 2 s budget: no separate warm-up window (the correctness call was one), no
    sync-to-sync calls (on a CPU they only repeat the timed calls; five were made before), and the timed calls
    the budget holds."""
    out = tmp_path / "out.json"
    run = run_eval("benchmark", spec_file(ONE), "--submission", f"{ROOT}/tests/submissions/one_second_calls.py",
                   "--max-time", "2", "--json", str(out))
    assert run.code == 0, run.stderr
    case = json.loads(out.read_text())["cases"][0]
    assert case["wall"] is None and case["stats"]["runs"] <= 3, (case["wall"], case["stats"])
