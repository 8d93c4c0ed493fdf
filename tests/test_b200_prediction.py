"""The B200 time model (arena/predict/b200.py), the counts it reads, and `eval.py predict` (docs/b200_prediction.md)."""
import json
import os
import re
import subprocess
import sys

import pytest

from arena.blackwell import ptx_rewrite, runtime
from arena.blackwell.ptx_text import register_widths
from arena.predict import b200
from arena.report.exit_codes import EXIT_USAGE
from arena.report.results import CaseResult
from arena.report.terminal import json_doc, popcorn_lines
from tests.fileload import load_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GEMM = {"m": 128, "n": 7168, "k": 16384, "l": 1}


def test_compulsory_bytes_are_the_operands_scales_and_result():
    # 128x16384 and 7168x16384 FP4, one FP8 scale per 16 elements, 128x7168 FP16: 69.07 MB (8.994 us of the
    # task's speed of light at 7.68 TB/s)
    assert b200.dram_bytes("nvfp4_gemm", GEMM) == 128 * 8192 + 7168 * 8192 + (128 + 7168) * 1024 + 2 * 128 * 7168
    dual = b200.dram_bytes("nvfp4_dual_gemm", {"m": 256, "n": 4096, "k": 7168, "l": 1})
    assert dual == 256 * 3584 + 2 * 4096 * 3584 + (256 + 2 * 4096) * 448 + 2 * 256 * 4096
    group = b200.dram_bytes("nvfp4_group_gemm", {"m": (64, 128), "n": (256, 256), "k": (512, 512), "g": 2})
    assert group == sum(b200.dram_bytes("nvfp4_gemm", {"m": m, "n": 256, "k": 512, "l": 1}) for m in (64, 128))
    assert b200.dram_bytes("nvfp4_gemv", {"m": 7168, "k": 16384, "l": 1}) == \
        7168 * 8192 + 8192 + (7168 + 1) * 1024 + 2 * 7168


@pytest.mark.parametrize("given", [None, [], {"mmas": -1}, {"mmas": 1.5}, {"mmas": True}, {"mmas": "3"},
                                   {"tma_bytes": 1 << 45}])
def test_counts_from_the_worker_are_checked(given):
    with pytest.raises(ValueError):
        b200.WorkCounts.from_reply(given)


def test_counts_a_worker_leaves_out_are_zero_and_unknown_names_are_ignored():
    counts = b200.WorkCounts.from_reply({"mmas": 4, "something_else": "x"})
    assert counts.mmas == 4 and counts.tma_bytes == 0


def test_the_library_words_become_named_counts(monkeypatch):
    monkeypatch.setitem(runtime._state, "counts", [0] * len(runtime.COUNT_WORDS))
    runtime._add_counts([3, 2, 0, 5, 10, 56, 128, 1, 56, 64, 128, 9, 12, 4096])
    runtime._add_counts([1, 1, 0, 1, 2, 112, 96, 2, 56, 32, 128, 1, 0, 1024])
    counts = runtime.take_counts()
    assert counts["mmas"] == 4 and counts["mma_work"] == 3 * 8192 and counts["tma_bytes"] == 12 * 16
    assert counts["grid_ctas"] == 112 and counts["cta_threads"] == 128 and counts["max_n"] == 64
    assert counts["dynamic_smem"] == 4096 and counts["allocs"] == 112
    assert runtime.take_counts()["mmas"] == 0        # taken: the next call starts from zero
    assert set(counts) <= set(b200.WorkCounts.__dataclass_fields__)


def _tiled(ctas: int, commits_per_mma: float, tiles_n: int = 64) -> b200.WorkCounts:
    mmas = ctas * 256
    return b200.WorkCounts(mmas=mmas, mma_work=128 * tiles_n * 64 * mmas, tma_loads=2 * mmas,
                           tma_bytes=ctas * (1 << 20), grid_ctas=ctas, allocs=ctas, max_n=tiles_n, max_m=128,
                           commits=int(mmas * commits_per_mma))


def test_a_serial_k_loop_costs_a_round_trip_per_commit_and_a_pipelined_one_does_not():
    serial = b200.predict("nvfp4_gemm", GEMM, _tiled(112, 1.0))
    pipelined = b200.predict("nvfp4_gemm", GEMM, _tiled(112, 0.25))
    assert serial.bound == "serial k-loop" and pipelined.bound != "serial k-loop"
    assert serial.b200_us > pipelined.b200_us
    assert serial.low_us < serial.b200_us < serial.high_us
    assert serial.counts["commits"] == 112 * 256        # what it rests on travels with it


def test_more_ctas_than_sms_take_more_waves():
    one, two = (b200.predict("nvfp4_gemm", GEMM, _tiled(n, 0.25)) for n in (148, 149))
    assert (one.waves, two.waves) == (1, 2)


def test_no_mma_and_scaled_mm_predictions_say_what_they_rest_on():
    plain = b200.predict("nvfp4_gemm", GEMM, b200.WorkCounts())
    assert plain.bound == "DRAM" and "efficiency is not seen" in plain.rests_on
    assert plain.b200_us == pytest.approx(b200.CALL_US + b200.dram_bytes("nvfp4_gemm", GEMM) / b200.DRAM_BYTES_PER_US,
                                          abs=1e-3)
    cublas = b200.predict("nvfp4_gemm", GEMM, b200.WorkCounts(scaled_mm_calls=1))
    assert cublas.b200_us == 22.4 and "cuBLASLt" in cublas.rests_on
    unknown = b200.predict("nvfp4_gemm", {"m": 256, "n": 512, "k": 256, "l": 1}, b200.WorkCounts(scaled_mm_calls=1))
    assert unknown.b200_us is None and "no public B200 time" in unknown.rests_on
    assert b200.predict("nvfp4_gemm", GEMM, None).b200_us is None


def test_popcorn_and_json_carry_the_prediction():
    predicted = b200.predict("nvfp4_gemm", GEMM, _tiled(112, 0.25)).as_dict()
    results = [CaseResult(index=0, spec="m: 128", passed=True, prediction=predicted),
               CaseResult(index=1, spec="m: 256", passed=False, error="wrong")]
    lines = dict(popcorn_lines("predict", results))
    assert lines["test.0.status"] == "pass" and lines["test.0.b200_predicted"] == str(round(predicted["b200_us"] * 1e3))
    assert "test.1.b200_predicted" not in lines and lines["check"] == "fail"
    doc = json.loads(json.dumps(json_doc("predict", "nvfp4_gemm", "s.py", results[:1], None)))
    assert doc["predicted_geomean_us"] == pytest.approx(predicted["b200_us"])
    assert doc["cases"][0]["prediction"]["counts"]["mmas"] == 112 * 256


def test_predict_without_a_hopper_gpu_says_what_it_needs():
    done = subprocess.run([sys.executable, "eval.py", "predict", "--submission", "submissions/torch_reference.py"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert done.returncode == EXIT_USAGE
    assert "--emulate-blackwell needs a Hopper GPU (sm_90a)" in done.stderr


def test_tma_loads_are_counted_and_stores_and_prefetches_are_not():
    """The rewriter tells the library which tensor TMAs load into shared memory (their bytes are the model's
    L2 traffic): the third argument of __nvfp4emu_tma_coord."""
    ptx = """.reg .b32 %r<9>; .reg .b64 %rd<9>;
    cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd1, {%r2, %r3}], [%r4];
    cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%rd1, {%r2, %r3}], [%r1];
    cp.async.bulk.prefetch.tensor.2d.L2.global [%rd1, {%r2, %r3}];
    """
    widths = register_widths(ptx)
    text = ptx_rewrite._TMA.sub(lambda m: ptx_rewrite._rewrite_tma_coordinate(m, widths), ptx)
    flags = []
    for block in text.split("{ // nvfp4-arena emulation")[1:]:     # one per TMA, its parameters named afresh
        stored = dict(re.findall(r"st\.param\.b\d+ \[(emu_p\d+)\], ([^;]+);", block))
        flags += [stored[p] for p in re.findall(r"__nvfp4emu_tma_coord, \(emu_p\d+, emu_p\d+, (emu_p\d+)\)", block)]
    assert flags == ["1", "0", "0"], text


@pytest.mark.gpu
def test_the_shipped_kernels_counted_work_is_the_gemms(tmp_path, hopper_gpu):
    """On a Hopper GPU: `eval.py predict` on the shipped kernel counts M*N*K multiply-adds exactly (its tiles
    divide the shapes) and tensor TMA bytes at least A and B once."""
    out = tmp_path / "p.json"
    done = subprocess.run([sys.executable, "eval.py", "predict", "-q", "--only", "2", "--submission", "submission.py",
                           "--json", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    case = json.loads(out.read_text())["cases"][0]
    counts = case["prediction"]["counts"]
    assert counts["mma_work"] == 128 * 7168 * 2048 and counts["mmas"] > 0
    assert counts["tma_bytes"] >= (128 + 7168) * 2048 // 2
    assert case["prediction"]["b200_us"] > 0


@pytest.mark.gpu
def test_a_gemv_of_torch_ops_is_timed_here_and_predicted_from_that(tmp_path, hopper_gpu):
    """On a Hopper GPU: the torch-only GEMV issues no emulated instruction, so `eval.py predict` times it natively
    and predicts from that time, saying so."""
    out = tmp_path / "p.json"
    done = subprocess.run([sys.executable, "eval.py", "predict", "-q", "--only", "2", "--task", "tasks/nvfp4_gemv",
                           "--submission", "tasks/nvfp4_gemv/torch_submission.py", "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    prediction = json.loads(out.read_text())["cases"][0]["prediction"]
    assert prediction["bound"] == "time here" and prediction["hopper_us"] > 0, prediction
    assert 500 < prediction["here_dram_gbps"] < 20000
    assert prediction["b200_us"] >= prediction["dram_us"] and "ran natively here" in prediction["rests_on"]


def test_the_calibration_fit_reads_runs_and_reports_both_halves(tmp_path):
    """bench/prediction/calibrate.py fit, as a subprocess, on runs of six gemm files of calibration.tsv: each
    passing case with counts becomes a row beside its logged time, a failing case none; the constants are fitted
    on half 0 and both halves get their error and rank correlation."""
    import csv
    with open(os.path.join(ROOT, "bench", "prediction", "calibration.tsv"), newline="") as f:
        rows = [r for r in csv.DictReader(f, delimiter="\t") if r["problem"] == "gemm" and r["kind"] == "tcgen05_cuda"]
    ids = sorted({r["id"] for r in rows})[:6]
    with open(tmp_path / "runs.jsonl", "w") as out:
        for n, file_id in enumerate(ids):
            cases = []
            for r in (r for r in rows if r["id"] == file_id):
                args = {k: int(v) for k, v in (p.split("=") for p in r["shape"].split(";"))}
                counts = _tiled(56 * (1 + n % 2), 1.0 if n % 3 else 0.25)
                cases.append({"spec": "; ".join(f"{k}: {v}" for k, v in args.items()), "passed": n != 5,
                              "prediction": b200.predict("nvfp4_gemm", args, counts).as_dict()})
            out.write(json.dumps({"id": file_id, "status": "rc 0", "report": {"cases": cases}}) + "\n")
    script = os.path.join(ROOT, "bench", "prediction", "calibrate.py")
    done = subprocess.run([sys.executable, script, "fit", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "fitted on half 0: CALL_US = " in done.stdout and "ROUND_TRIP_US = " in done.stdout
    table = [line for line in done.stdout.splitlines() if line[:2] in ("0\t", "1\t")]
    assert len(table) == 15 and not any(ids[5][:60] in line for line in table)      # the failing file has no rows
    assert "half 0 (fitting)" in done.stdout and "half 1 (held out)" in done.stdout
    assert "median relative error" in done.stdout and "Spearman of geometric means" in done.stdout
    kept = subprocess.run([sys.executable, script, "fit", str(tmp_path), "--constants"], capture_output=True,
                          text=True, timeout=120)
    assert kept.returncode == 0 and "fitted" not in kept.stdout


def _calibrate():
    return load_file(os.path.join(ROOT, "bench", "prediction", "calibrate.py"), "calibrate")


def test_the_rank_correlation_gives_tied_values_their_mean_rank():
    """Files with the same counts get the same prediction; Spearman's rho ranks ties by the mean of their ranks
    (as scipy.stats.spearmanr), so the order files happen to be listed in cannot move the figure."""
    calibrate = _calibrate()
    predicted, logged = [1.0, 1.0, 2.0, 3.0], [2.0, 1.0, 3.0, 4.0]
    rho = calibrate.spearman(predicted, logged)
    assert rho == pytest.approx(0.9486832980505138)            # scipy.stats.spearmanr on the same lists
    assert calibrate.spearman(predicted, [1.0, 2.0, 3.0, 4.0]) == pytest.approx(rho)   # the tie's order: no matter
    assert calibrate.spearman([1.0, 2.0, 3.0], [3.0, 2.0, 1.0]) == pytest.approx(-1.0)


def test_no_gpu_holds_more_runs_than_its_slots_however_runs_end():
    """calibrate.py run: the jIab-b/mlsys files allocate 40 GB at import, so a GPU takes at most --per-gpu runs at
    once. Runs of uneven length end out of order; 12 runs, 6 at once, over 2 GPUs with 3 slots each."""
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor
    slots = _calibrate().gpu_slots(["0", "1"], 3)
    held, most, lock = {"0": 0, "1": 0}, {"0": 0, "1": 0}, threading.Lock()

    def one(i):
        gpu = slots.get()
        with lock:
            held[gpu] += 1
            most[gpu] = max(most[gpu], held[gpu])
        time.sleep(0.01 * (i % 4))
        with lock:
            held[gpu] -= 1
        slots.put(gpu)
    with ThreadPoolExecutor(6) as pool:
        list(pool.map(one, range(12)))
    assert most == {"0": 3, "1": 3} and held == {"0": 0, "1": 0}


GEMV = {"m": 7168, "k": 16384, "l": 1}


def test_a_call_that_ran_natively_is_predicted_from_its_time_here():
    """No emulated instruction: the DRAM floor moves from this GPU's measured bandwidth to the B200's, and what the
    kernel took beyond it is scaled by BEYOND_DRAM_RATIO; the line says what it rests on."""
    moved = b200.dram_bytes("nvfp4_gemv", GEMV)
    here_floor_us = moved / (4000 * 1e3)                # 4000 GB/s here
    native = b200.NativeTiming(median_us=here_floor_us + 20.0, dram_gbps=4000.0)
    p = b200.predict("nvfp4_gemv", GEMV, b200.WorkCounts(tma_loads=3, tma_bytes=4096), native)
    assert p.b200_us == pytest.approx(moved / b200.DRAM_BYTES_PER_US + 20.0 * b200.BEYOND_DRAM_RATIO, abs=1e-3)
    assert p.bound == "time here" and p.hopper_us == pytest.approx(here_floor_us + 20.0, abs=1e-3)
    assert "ran natively here" in p.rests_on and "4000 GB/s" in p.rests_on
    assert p.low_us < p.b200_us < p.high_us
    # faster here than the copy rate allows (reads outrun copies): the B200's floor, never less
    quick = b200.predict("nvfp4_gemv", GEMV, b200.WorkCounts(), b200.NativeTiming(here_floor_us / 2, 4000.0))
    assert quick.b200_us == pytest.approx(moved / b200.DRAM_BYTES_PER_US, abs=1e-3)


def test_a_call_far_from_its_dram_floor_here_is_scaled_as_latency_bound():
    """A call that moved under LATENCY_BOUND_SHARE of the bandwidth here keeps about its time (a B200 SM is not
    faster at latency); one just above it is scaled as memory-bound. The line says which."""
    moved = b200.dram_bytes("nvfp4_gemv", GEMV)
    floor_us = moved / (4000 * 1e3)
    b200_floor_us = moved / b200.DRAM_BYTES_PER_US
    slow = floor_us / (b200.LATENCY_BOUND_SHARE * 0.9)          # moved 90 % of the threshold's share
    fast = floor_us / (b200.LATENCY_BOUND_SHARE * 1.1)
    p_slow = b200.predict("nvfp4_gemv", GEMV, b200.WorkCounts(), b200.NativeTiming(slow, 4000.0))
    p_fast = b200.predict("nvfp4_gemv", GEMV, b200.WorkCounts(), b200.NativeTiming(fast, 4000.0))
    assert p_slow.b200_us == pytest.approx(b200_floor_us + (slow - floor_us) * b200.LATENCY_BOUND_RATIO, abs=1e-3)
    assert p_fast.b200_us == pytest.approx(b200_floor_us + (fast - floor_us) * b200.BEYOND_DRAM_RATIO, abs=1e-3)
    assert "latency-bound" in p_slow.rests_on and "memory-bound" in p_fast.rests_on
    assert p_slow.b200_us > 1.5 * p_fast.b200_us


@pytest.mark.parametrize("emulated", [{"mmas": 1, "mma_work": 8192}, {"scale_copies": 1}, {"scaled_mm_calls": 1}])
def test_a_call_with_emulated_work_is_never_predicted_from_its_time_here(emulated):
    counts = b200.WorkCounts(**emulated)
    assert not b200.runs_natively(counts)
    p = b200.predict("nvfp4_gemm", GEMM, counts, b200.NativeTiming(5000.0, 4000.0))
    assert p.hopper_us is None and p.bound != "time here"


@pytest.mark.parametrize("median_us,gbps", [(0.0, 4000.0), (10.0, 0.0), (float("nan"), 4000.0),
                                            (10.0, float("inf"))])
def test_a_native_timing_needs_a_positive_time_and_bandwidth(median_us, gbps):
    with pytest.raises(ValueError):
        b200.NativeTiming(median_us, gbps)


class _FakeEvaluator:
    """What arena/run/prediction.py reads of an Evaluator: test(), the last call's counts, its limits."""

    def __init__(self, counts, passed=True):
        from arena.run.limits import Limits
        self.work_counts, self.passed, self.limits = counts, passed, Limits(max_wall=10.0, max_runs=200)

    def test(self, index, case):
        return CaseResult(index=index, spec=case.spec, passed=self.passed, error="" if self.passed else "wrong")


def _timed(median_ns, passed=True, untrusted=""):
    from arena.clock.timing import summarize
    seen = {}

    def benchmark_case(ev, index, case, sol_us):
        seen["limits"] = ev.limits
        result = CaseResult(index=index, spec=case.spec, passed=passed, untrusted=untrusted,
                            error="" if passed else "failed the correctness check before timing")
        result.stats = summarize([median_ns * 0.9, median_ns, median_ns * 3]) if passed else None
        return result
    return benchmark_case, seen


def test_predict_mode_times_a_natively_run_case_briefly_and_predicts_from_its_median(monkeypatch):
    from arena.run import prediction
    from arena.taskdef.specs import Case
    benchmark_case, seen = _timed(40_000.0)
    monkeypatch.setattr(prediction, "benchmark_case", benchmark_case)
    ev = _FakeEvaluator({"tma_loads": 2, "tma_bytes": 512})
    case = Case(spec="m: 7168; k: 16384; l: 1", args=dict(GEMV))
    result = prediction.predict_case(ev, 0, case, "nvfp4_gemv", 4000.0)
    assert result.passed and result.prediction["hopper_us"] == pytest.approx(40.0)
    assert seen["limits"].max_wall == prediction.NATIVE_TIMING_S and ev.limits.max_wall == 10.0   # put back
    # emulated work: never timed, predicted from its counts
    monkeypatch.setattr(prediction, "benchmark_case", lambda *a: pytest.fail("an emulated call was timed"))
    counted = prediction.predict_case(_FakeEvaluator({"mmas": 4, "mma_work": 4 * 8192, "allocs": 1}), 0, case,
                                      "nvfp4_gemv", 4000.0)
    assert counted.prediction["hopper_us"] is None and counted.prediction["b200_us"] > 0
    # a wrong result: no prediction at all, nothing timed
    assert prediction.predict_case(_FakeEvaluator({}, passed=False), 0, case, "nvfp4_gemv", 4000.0).prediction == {}


def test_a_native_timing_that_failed_falls_back_to_the_counts_and_one_in_doubt_predicts_with_a_warning(monkeypatch):
    from arena.run import prediction
    from arena.taskdef.specs import Case
    case = Case(spec="m: 7168; k: 16384; l: 1", args=dict(GEMV))
    monkeypatch.setattr(prediction, "benchmark_case", _timed(40_000.0, passed=False)[0])
    failed = prediction.predict_case(_FakeEvaluator({}), 0, case, "nvfp4_gemv", 4000.0)
    assert failed.prediction["hopper_us"] is None and failed.prediction["bound"] == "DRAM"
    assert any("was not timed" in w for w in failed.warnings)
    doubt = "the evaluator's own clock saw 115 us per call"
    monkeypatch.setattr(prediction, "benchmark_case", _timed(40_000.0, untrusted=doubt)[0])
    doubted = prediction.predict_case(_FakeEvaluator({"allocs": 1, "commits": 1}), 0, case, "nvfp4_gemv", 4000.0)
    assert doubted.prediction["hopper_us"] == pytest.approx(40.0)
    assert any(doubt in w and "may be off" in w for w in doubted.warnings)


def test_emulated_mma_sites_are_counted_over_cuda_and_dsl_modules(tmp_path, monkeypatch):
    """take_counts says how many tcgen05.mma instructions the emulated modules hold: CUDA extensions' sites files
    and the CuTe DSL modules compiled in the process (read or not)."""
    from arena.blackwell import cute_dsl
    module = tmp_path / "ext.so"
    module.write_bytes(b"")
    (tmp_path / "ext.cuda.o.emu.json").write_text(json.dumps([
        {"site": 1, "instruction": "tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale [%r1], %rd1, %rd2, %r2;"},
        {"site": 2, "instruction": "tcgen05.commit.cta_group::1.mbarrier::arrive::one.b64 [%rd3];"}]))
    monkeypatch.setitem(runtime._state, "modules", [str(module)])
    monkeypatch.setattr(cute_dsl, "_SITES", {1: (object(), {1: "@%p1 tcgen05.mma.cta_group::2.kind::f16 [%r1];",
                                                             2: "tcgen05.alloc.cta_group::1 [%r2], 32;"})})
    assert runtime.take_counts()["mma_sites"] == 2


def test_a_call_that_counted_no_mma_beside_mma_sites_is_not_predicted_nor_timed(monkeypatch):
    """Counts out of reach (a CuTe DSL kernel called through TVM FFI) must not pass for a CUDA-core call: it would be
    timed here with its MMAs emulated. The prediction says why there is none."""
    lost = b200.WorkCounts(mma_sites=4, tma_loads=0)
    assert not b200.runs_natively(lost)
    p = b200.predict("nvfp4_gemm", GEMM, lost, b200.NativeTiming(5000.0, 4000.0))
    assert p.b200_us is None and "out of reach" in p.rests_on and "4 tcgen05.mma" in p.rests_on
    from arena.run import prediction
    from arena.taskdef.specs import Case
    monkeypatch.setattr(prediction, "benchmark_case", lambda *a: pytest.fail("a call with lost counts was timed"))
    result = prediction.predict_case(_FakeEvaluator({"mma_sites": 4}), 0, Case(spec="m: 128", args=dict(GEMM)),
                                     "nvfp4_gemm", 4000.0)
    assert result.passed and result.prediction["b200_us"] is None


@pytest.mark.gpu
def test_a_cute_dsl_kernel_called_through_tvm_ffi_has_its_counts_read(tmp_path, hopper_gpu):
    """On a Hopper GPU with CuTe DSL and apache-tvm-ffi: our DSL GEMM look-alike compiled with --enable-tvm-ffi loads
    its library from the JIT's own code; the compile hook's accessor reaches the handle, so the emulation record is
    read as for any DSL kernel: MMAs counted and a prediction made."""
    pytest.importorskip("cutlass.cute")
    pytest.importorskip("tvm_ffi")
    source = open(os.path.join(ROOT, "tests", "blackwell", "cute_dsl_nvfp4_gemm.py")).read()
    plain = "cute.compile(_gemm, *_pointers(), (0, 0, 0, 0))"
    assert plain in source
    variant = tmp_path / "tvm_ffi_gemm.py"
    variant.write_text(source.replace(plain, plain[:-1] + ', options="--enable-tvm-ffi")'))
    out = tmp_path / "p.json"
    done = subprocess.run([sys.executable, "eval.py", "predict", "-q", "--only", "2", "--submission", str(variant),
                           "--json", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    prediction = json.loads(out.read_text())["cases"][0]["prediction"]
    assert prediction["counts"]["mmas"] > 0 and prediction["counts"]["mma_sites"] > 0, prediction
    assert prediction["b200_us"] > 0 and prediction["hopper_us"] is None
    assert prediction["counts"]["dsl_calls"] == 0       # a TVM FFI function calls into C: no marshalling counted


@pytest.mark.gpu
def test_a_direct_cute_dsl_call_and_the_pointers_made_for_it_are_counted(tmp_path, hopper_gpu):
    """On a Hopper GPU with CuTe DSL: our DSL GEMM look-alike compiles once with pointers of its own, then makes
    five pointers and calls the compiled function once per call; each predicted case counts exactly that, and the
    prediction carries its host work."""
    pytest.importorskip("cutlass.cute")
    out = tmp_path / "p.json"
    done = subprocess.run([sys.executable, "eval.py", "predict", "-q", "--only", "1,2", "--submission",
                           os.path.join(ROOT, "tests", "blackwell", "cute_dsl_nvfp4_gemm.py"), "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    cases = json.loads(out.read_text())["cases"]
    assert len(cases) == 2
    for case in cases:
        prediction = case["prediction"]
        assert (prediction["counts"]["dsl_calls"], prediction["counts"]["dsl_arguments"]) == (1, 5), prediction
        assert prediction["call_us"] == pytest.approx(b200.CALL_US + b200.DSL_CALL_US + 5 * b200.DSL_ARGUMENT_US,
                                                      abs=1e-3)
        assert "1 direct CuTe DSL call(s) with 5 argument object(s)" in prediction["rests_on"]


def test_a_direct_cublaslt_fp4_matmul_is_predicted_from_cublaslts_public_time_and_never_timed_here():
    counts = b200.WorkCounts(cublaslt_fp4_calls=1)
    assert not b200.runs_natively(counts)
    p = b200.predict("nvfp4_gemm", GEMM, counts, b200.NativeTiming(5000.0, 4000.0))
    assert p.b200_us == b200.SCALED_MM_US[(128, 7168, 16384, 1)] and p.bound == "cuBLASLt"
    assert p.rests_on.startswith("cuBLASLt's NVFP4 matmul: ") and p.hopper_us is None


def test_a_direct_cute_dsl_call_adds_its_host_work_per_call_and_per_argument_object_made():
    pipelined = _tiled(112, 0.25)
    plain = b200.predict("nvfp4_gemm", GEMM, pipelined)
    called = b200.predict("nvfp4_gemm", GEMM, b200.WorkCounts(**{**pipelined.__dict__, "dsl_calls": 1,
                                                                   "dsl_arguments": 7}))
    added = b200.DSL_CALL_US + 7 * b200.DSL_ARGUMENT_US
    assert called.b200_us == pytest.approx(plain.b200_us + added, abs=1e-3)
    assert called.call_us == pytest.approx(b200.CALL_US + added, abs=1e-3) and plain.call_us == b200.CALL_US
    assert "1 direct CuTe DSL call(s) with 7 argument object(s)" in called.rests_on
    assert "CuTe DSL" not in plain.rests_on


class _Compiled:
    """A stand-in for CuTe DSL's JitCompiledFunction: its call returns what it was given."""
    def __call__(self, *args, **kwargs):
        return args, kwargs


def test_dsl_calls_count_the_argument_objects_made_for_them_not_those_kept_from_before():
    """The wrappers cute_dsl installs on CuTe DSL's runtime and executor modules, on stand-ins of both: an argument
    object counts when it was made since the last call (or count) and passed to this one."""
    from types import SimpleNamespace

    from arena.blackwell import cute_dsl
    runtime_module = SimpleNamespace(make_ptr=lambda address: [address], from_dlpack=lambda t: {"t": t})
    executor_module = SimpleNamespace(JitCompiledFunction=type("JitCompiledFunction", (_Compiled,), {}))
    cute_dsl._wrap_argument_makers(runtime_module)
    cute_dsl._wrap_direct_call(executor_module)
    compiled = executor_module.JitCompiledFunction()
    cute_dsl.take_host_counts()

    kept = runtime_module.make_ptr(1)               # made before the call began: the submission keeps it
    cute_dsl.take_host_counts()
    compile_time = runtime_module.make_ptr(0)       # made and never passed to the call
    a, b = runtime_module.make_ptr(2), runtime_module.from_dlpack(3)
    assert compiled(a, kept, 4, c=b) == ((a, kept, 4), {"c": b})
    assert cute_dsl.take_host_counts() == {"dsl_calls": 1, "dsl_arguments": 2}
    assert compile_time == [0]

    again = runtime_module.make_ptr(5)
    compiled(a, again)                              # `a` was made for the first call: reused now
    compiled(again)                                 # made before the call before this one
    assert cute_dsl.take_host_counts() == {"dsl_calls": 2, "dsl_arguments": 1}
    assert cute_dsl.take_host_counts() == {"dsl_calls": 0, "dsl_arguments": 0}
