"""nvfp4_moe: the reference against an fp64 numpy model that shares no code with it, the
reference's own self-check, the structured probes, and the stage diagnosis of each planted bug (quiet on honest
kernels), through real eval.py runs."""
import os

import numpy as np
import torch
import pytest

from tests.evalrun import ROOT, broken, run_eval, spec_file
from tests.taskload import task_reference

pytestmark = pytest.mark.slow     # every mode of the nvfp4_moe task on the CPU: `pytest -m slow`

TASK = os.path.join(ROOT, "tasks", "nvfp4_moe")
CASE = "t: 16; h: 256; i: 128; e: 8; k: 2; seed: 7\n"
E2M1_GRID = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


@pytest.fixture(scope="module")
def reference():
    with task_reference(TASK) as module:
        yield module


# ---- an fp64 model from the task's description alone ---------------------------------------------------------

def bytes_of(t: torch.Tensor) -> np.ndarray:
    return t.contiguous().view(torch.uint8).cpu().numpy().astype(np.int64)


def e2m1_values(packed: torch.Tensor) -> np.ndarray:
    raw = bytes_of(packed)
    codes = np.stack((raw & 0xF, raw >> 4), axis=-1).reshape(*raw.shape[:-1], -1)
    return np.where(codes & 8, -1.0, 1.0) * E2M1_GRID[codes & 7]


def e4m3_values(scales: torch.Tensor) -> np.ndarray:
    raw = bytes_of(scales)
    exponent, mantissa = (raw >> 3) & 0xF, raw & 7
    value = np.where(exponent == 0, mantissa / 8.0 * 2.0 ** -6, (1 + mantissa / 8.0) * 2.0 ** (exponent - 7.0))
    return np.where(raw & 0x80, -value, value)


def round_e4m3(v: np.ndarray) -> np.ndarray:
    """Non-negative values to the nearest e4m3 value (ties to even), at most 448."""
    out = np.zeros_like(v)
    nz = v > 0
    exponent = np.maximum(np.floor(np.log2(v[nz])), -6.0)
    step = 2.0 ** (exponent - 3)
    out[nz] = np.minimum(np.round(v[nz] / step) * step, 448.0)
    return out


def round_e2m1(m: np.ndarray) -> np.ndarray:
    """Non-negative magnitudes to the nearest e2m1 value (ties to the even code), at most 6."""
    m = np.minimum(m, 6.0)
    low = np.clip(np.searchsorted(E2M1_GRID, m, side="right") - 1, 0, 6)
    up = low + 1
    d_low, d_up = m - E2M1_GRID[low], E2M1_GRID[up] - m
    pick = np.where((d_up < d_low) | ((d_up == d_low) & (up % 2 == 0)), up, low)
    return E2M1_GRID[pick]


def nvfp4(x: np.ndarray, gs: float) -> np.ndarray:
    """x [R, C] -> its NVFP4 value: block scale e4m3(amax/6/gs), elements e2m1(x / (scale × gs))."""
    blocks = x.reshape(x.shape[0], -1, 16)
    scale = round_e4m3(np.abs(blocks).max(axis=-1, keepdims=True) / 6.0 / gs) * gs
    safe = np.where(scale > 0, scale, 1.0)
    q = np.sign(blocks) * round_e2m1(np.abs(blocks) / safe) * np.where(scale > 0, scale, 0.0)
    return q.reshape(x.shape)


def model_fp64(data) -> np.ndarray:
    (x, ids, weights, w1, w1_sf, _, w1_gs, w2, w2_sf, _, w2_gs, a1_gs, a2_gs, _) = data
    ids, weights = ids.cpu().numpy(), weights.double().cpu().numpy()
    g1, g2 = float(a1_gs[0]), float(a2_gs[0])
    W1 = e2m1_values(w1) * np.repeat(e4m3_values(w1_sf), 16, axis=-1) * w1_gs.double().cpu().numpy()[:, None, None]
    W2 = e2m1_values(w2) * np.repeat(e4m3_values(w2_sf), 16, axis=-1) * w2_gs.double().cpu().numpy()[:, None, None]
    xq = nvfp4(x.double().cpu().numpy(), g1)
    inter = W1.shape[1] // 2
    out = np.zeros((x.shape[0], W2.shape[1]))
    for t in range(x.shape[0]):
        for j in range(ids.shape[1]):
            e = ids[t, j]
            hid = W1[e] @ xq[t]
            gate, up = hid[:inter], hid[inter:]
            act = gate / (1.0 + np.exp(-gate)) * up
            out[t] += weights[t, j] * (W2[e] @ nvfp4(act[None, :], g2)[0])
    return out


@pytest.mark.parametrize("which", ["tests", "robustness"])
def test_the_reference_agrees_with_an_fp64_model_within_the_tolerance(reference, which):
    from arena.taskdef.definition import load_task
    task = load_task(TASK)
    rtol, atol = task.tolerance["rtol"], task.tolerance["atol"]
    for case in task.cases(which):
        data = reference.generate_input(**case.args)
        model = model_fp64(data)
        got = reference.ref_kernel(data).double().cpu().numpy()
        scale = np.abs(model).max()
        beyond = np.abs(got - model) > atol + rtol * np.abs(model)
        assert not beyond.any(), (case.spec, int(beyond.sum()))
        # most elements are one bf16 rounding away; rare requantization flips (fp32 vs fp64 at a midpoint) more
        near = np.abs(got - model) <= np.abs(model) * 2.0 ** -8 + 1e-6 * scale
        assert near.mean() > 0.98, (case.spec, float(near.mean()))


def test_the_reference_self_check_agrees(reference):
    data = reference.generate_input(t=16, h=256, i=128, e=8, k=2, seed=7)
    expected = reference.ref_kernel(data).float().cpu()
    dense = reference.dense_reference(data)
    assert torch.allclose(expected.double(), dense, rtol=2e-2, atol=2e-2)


def test_the_uniform_probe_gives_exactly_1_5_squared_times_h_before_the_activation(reference):
    h = 256
    data = reference.generate_input(t=4, h=h, i=64, e=2, k=2, seed=1, data="uniform")
    x_real = reference.stages(data, upto=1)["x_dequantized"]
    w1_real = e2m1_values(data[3]) * np.repeat(e4m3_values(data[4]), 16, axis=-1)
    assert np.all(x_real.cpu().numpy() @ w1_real[0].T == 1.5 * 1.5 * h)        # each L1 output exactly 1.5²·H
    blocked = reference.generate_input(t=4, h=h, i=64, e=2, k=2, seed=1, data="uniform")[5]
    assert torch.equal(blocked.view(torch.uint8), torch.full_like(blocked.view(torch.uint8), 0x38))   # all 1.0


@pytest.mark.parametrize("submission", [os.path.join(TASK, "torch_submission.py"), broken("moe_honest")])
def test_honest_submissions_pass_every_case_and_every_probe(submission):
    for which in ("tests", "robustness"):
        run = run_eval("test", "--task", TASK, "--submission", submission, "--set", which)
        assert run.code == 0, run.stdout[-2000:]
    probes = run_eval("diagnose", spec_file(CASE), "--task", TASK, "--submission", submission)
    assert probes.code == 0 and "5 of 5 probes passed" in probes.stdout, probes.stdout[-2000:]
    assert "Stage" not in probes.stdout


@pytest.mark.parametrize("bug,expected", [
    ("moe_activation_not_quantized", "Stage 1 activation quantization: x used in bf16"),
    ("moe_scales_blocked_as_plain", "Stage 2 L1 GEMM: the weights' blocked (128x4) scales read as plain"),
    ("moe_alpha_without_weight_scale", "Stage 2 L1 GEMM: alpha without the weight global scale"),
    ("moe_gate_up_swapped", "Stage 3 SiLU(gate)·up: gate and up exchanged"),
    ("moe_requant_skipped", "Stage 4 requantization: the intermediate kept in high precision"),
    ("moe_combine_unweighted", "Stage 6 weighted combine: the experts' outputs summed without the top-k"),
])
def test_each_planted_bug_gets_its_stage_and_name(bug, expected):
    run = run_eval("test", spec_file(CASE), "--task", TASK, "--submission", broken(bug))
    assert run.code == 112, run.stdout[-2000:]
    text = " ".join(run.stdout.split())
    assert expected in text, run.stdout[-3000:]
    assert "reference self-check: ref_kernel and the independent dense per-token reference agree on 100.00%" in text


ONE_ROW_TILE = "t: 16; h: 64; i: 64; e: 4; k: 2; seed: 3\n"     # w1's 2I = 128 and w2's H = 64 rows: one tile each


def test_a_remap_one_row_tile_hides_is_caught_by_diagnoses_contrast_probe():
    """With every weight's scale rows in one 128-row tile, a wrong row-tile stride reads the reference's bytes:
    `test` cannot see it, and `diagnose` probes a shape with two row tiles (H = 192, I = 128) and names it there."""
    run = run_eval("test", spec_file(ONE_ROW_TILE), "--task", TASK, "--submission", broken("moe_sf_k_as_index"))
    assert run.code == 0, run.stdout[-2000:]
    probes = run_eval("diagnose", spec_file(ONE_ROW_TILE), "--task", TASK, "--submission", broken("moe_sf_k_as_index"))
    text = " ".join(probes.stdout.split())
    assert probes.code == 112 and "the row-tile stride computed from K instead of K/16" in text, probes.stdout[-3000:]


def test_a_wrong_scale_remap_passes_the_uniform_probe_and_fails_the_random_case():
    """The field story: the uniform probe cannot see a scale layout, so a layout bug passes it and fails the
    random case, which points at the scales rather than the GEMM."""
    probes = run_eval("diagnose", spec_file(CASE), "--task", TASK, "--submission", broken("moe_scales_blocked_as_plain"))
    text = " ".join(probes.stdout.split())
    assert probes.code == 112 and "✔ uniform" in text and "✘ random case" in text, probes.stdout[-3000:]


def test_a_wrong_reference_is_named_before_the_submission_is_blamed(reference):
    """The self-check fires when the reference's own output disagrees with the independent dense one (here a
    reference 10 % off, as a wrong dequantization would be): no verdict on the submission."""
    data = reference.generate_input(t=16, h=256, i=128, e=8, k=2, seed=7)
    right = reference.ref_kernel(data).clone()
    wrong_reference = (right.float() * 1.1).to(right.dtype)
    summary, evidence, key = reference.diagnose_failure(data, right, wrong_reference, 2e-2, 2e-2)
    assert key == "reference_inconsistent" and "The reference itself is inconsistent" in summary, summary
    assert any(line.startswith("reference self-check:") for line in evidence)


def test_an_unweighted_combine_fails_every_structured_probe():
    probes = run_eval("diagnose", spec_file(CASE), "--task", TASK, "--submission", broken("moe_combine_unweighted"))
    text = " ".join(probes.stdout.split())
    assert probes.code == 112, probes.stdout[-3000:]
    assert "✘ uniform" in text and "✘ identity routing" in text and "✘ single expert" in text, probes.stdout[-3000:]


# ---- the precision envelope: production precision passes, small systematic errors and planted bugs fail -----

@pytest.fixture
def moe_helper(monkeypatch):
    monkeypatch.syspath_prepend(os.path.join(ROOT, "tests", "broken"))
    import _moe
    return _moe


def _run_helper(reference, helper, case: dict, **kwargs):
    data = reference.generate_input(**case)
    copy = tuple(t.clone() for t in data)
    return data, helper.run(copy, **kwargs)


SMALL = {"t": 16, "h": 256, "i": 128, "e": 8, "k": 2, "seed": 41}
EMPTY = {"t": 3, "h": 128, "i": 64, "e": 16, "k": 2, "seed": 46}
TIES = {"t": 16, "h": 256, "i": 128, "e": 8, "k": 2, "seed": 48, "data": "ties"}


@pytest.mark.parametrize("case", [SMALL, EMPTY, TIES])
@pytest.mark.parametrize("precision", ["vllm", "fp16"])
def test_production_precision_lies_inside_the_envelope_where_the_old_tolerance_failed(reference, moe_helper, case,
                                                                                       precision):
    import torch
    kind = moe_helper.VLLM if precision == "vllm" else {"hidden": torch.float16, "act": torch.float16,
                                                         "y": torch.float16}
    data, out = _run_helper(reference, moe_helper, case, precision=kind)
    assert not bool(reference.moe_envelope.outside(data, out).any())


def test_the_vllm_look_alike_is_beyond_the_old_flat_tolerance(reference, moe_helper):
    """The envelope is not the old check in disguise: vLLM's precision steps miss rtol = atol = 2e-2."""
    data, out = _run_helper(reference, moe_helper, {"t": 64, "h": 512, "i": 256, "e": 16, "k": 4, "seed": 42},
                            precision=moe_helper.VLLM)
    expected = reference.ref_kernel(data)
    assert not torch.allclose(out.float(), expected.float(), rtol=2e-2, atol=2e-2)
    assert not bool(reference.moe_envelope.outside(data, out).any())


@pytest.mark.parametrize("bug,case", [("nudged", SMALL), ("ties_away", TIES), ("stale_tile", EMPTY),
                                      ("requant_truncated", SMALL), ("requant_skipped", SMALL)])
def test_small_systematic_errors_and_misrounding_leave_the_envelope(reference, moe_helper, bug, case):
    data, out = _run_helper(reference, moe_helper, case, bug=bug)
    assert bool(reference.moe_envelope.outside(data, out).any()), bug


def test_ties_away_is_invisible_without_exact_ties(reference, moe_helper):
    """Why the ties case exists: on random data with an arbitrary global scale no element sits on a midpoint."""
    data, out = _run_helper(reference, moe_helper, SMALL, bug="ties_away")
    assert not bool(reference.moe_envelope.outside(data, out).any())


def test_the_cases_exercise_empty_experts_and_exact_ties(reference):
    data = reference.generate_input(**EMPTY)
    used = set(data[1].flatten().tolist())
    assert len(used) < 16 and any(e not in used and e + 1 in used for e in range(15))
    ties = reference.generate_input(**TIES)
    assert float(ties[11][0]) == 1.0
    x = ties[0].float().unflatten(-1, (-1, 16))
    scaled = x / (x.abs().amax(-1, keepdim=True) / 6)
    assert bool((scaled.abs() == 2.5).any()) and bool((scaled.abs() == 0.25).any())


@pytest.mark.parametrize("bug", ["sf_row_off_by_one", "sf_k_off_by_one", "sf_k_as_index", "sf_32x4_transposed",
                                 "scales_blocked_as_plain"])
def test_each_scale_factor_remap_is_named_as_one(reference, moe_helper, bug):
    data, out = _run_helper(reference, moe_helper, SMALL, bug=bug)
    expected = reference.ref_kernel(tuple(t.clone() for t in data))
    summary, evidence, key = reference.diagnose_failure(data, out, expected, 2e-2, 2e-2)
    assert "scale-factor remap" in summary and "reproduces" in summary, (summary, evidence)


def test_a_stale_tile_after_an_empty_expert_is_localised_not_misnamed(reference, moe_helper):
    data, out = _run_helper(reference, moe_helper, EMPTY, bug="stale_tile")
    expected = reference.ref_kernel(tuple(t.clone() for t in data))
    summary, _, key = reference.diagnose_failure(data, out, expected, 2e-2, 2e-2)
    assert key == "localised" and "received none" in summary, summary


def test_a_profile_that_overflows_fp16_accepts_nothing(reference):
    """On the uniform probe SiLU·up is about 3e5, past fp16: the fp16 profiles' saturated requantization once
    made a doubled (unweighted) output look reachable. Twice the right answer must lie outside the envelope."""
    data = reference.generate_input(t=16, h=256, i=128, e=8, k=2, seed=7, data="uniform")
    expected = reference.ref_kernel(tuple(t.clone() if isinstance(t, torch.Tensor) else t for t in data))
    assert not bool(reference.moe_envelope.outside(data, expected).any())
    assert bool(reference.moe_envelope.outside(data, (expected.float() * 2).to(expected.dtype)).all())


@pytest.mark.parametrize("precision", ["routed_weight", "other_neighbour"])
def test_a_weight_rounded_once_from_fp32_and_the_other_bf16_neighbour_are_accepted(reference, moe_helper,
                                                                                   precision):
    """vLLM's MUL_ROUTED_WEIGHT (the weighted fp32 product stored once in bf16, summed in fp32), and a final
    rounding to the other bf16 neighbour of the exact sum (what bf16 atomic adds can give): both correct, on
    every test case."""
    import yaml
    kind = moe_helper.ROUTED_WEIGHT if precision == "routed_weight" else {"final": "other"}
    for case in yaml.safe_load(open(os.path.join(TASK, "task.yml")))["tests"]:
        data, out = _run_helper(reference, moe_helper, case, precision=kind)
        assert not bool(reference.moe_envelope.outside(data, out).any()), case


REPEATED = {"t": 32, "h": 256, "i": 128, "e": 8, "k": 4, "seed": 49, "data": "repeated_ids"}
PADDED = {"t": 24, "h": 192, "i": 64, "e": 8, "k": 2, "seed": 50}


@pytest.mark.parametrize("bug,case", [("duplicate_ids_once", REPEATED), ("expert_offset_unpadded", PADDED)])
def test_the_tests_hold_a_repeated_expert_id_and_padded_scale_tiles(reference, moe_helper, bug, case):
    """Two bugs that only robustness caught: a token routed twice to one expert counted once (dense routing
    weights built by assignment), and per-expert scale offsets that ignore the 128-row padding (H = 192: w2's
    192 scale rows fill 256). Each passes a case without that feature, fails the test case that has it, and
    an honest kernel passes both."""
    import yaml
    tests = yaml.safe_load(open(os.path.join(TASK, "task.yml")))["tests"]
    assert case in tests
    _, plain = _run_helper(reference, moe_helper, SMALL, bug=bug)
    data = reference.generate_input(**SMALL)
    assert not bool(reference.moe_envelope.outside(data, plain).any()), "the bug shows without the feature"
    data, out = _run_helper(reference, moe_helper, case, bug=bug)
    assert bool(reference.moe_envelope.outside(data, out).any()), bug
    data, honest = _run_helper(reference, moe_helper, case)
    assert not bool(reference.moe_envelope.outside(data, honest).any())


def test_a_duplicate_id_counted_once_is_said_in_words(reference, moe_helper):
    data, out = _run_helper(reference, moe_helper, REPEATED, bug="duplicate_ids_once")
    expected = reference.ref_kernel(tuple(t.clone() for t in data))
    summary, _, _ = reference.diagnose_failure(data, out, expected, 2e-2, 2e-2)
    assert "exactly those whose top-k names one expert twice: a duplicate id counted once" in summary, summary


def test_no_bug_is_named_that_equals_the_reference_on_the_case(reference, moe_helper):
    """On uniform data every scale is 1 and the intermediate exact in e2m1: "never requantized" (and the scale
    remaps) equal the reference there, so a 1 % error is not blamed on them (it was: "Stage 4 requantization")."""
    case = {"t": 16, "h": 256, "i": 128, "e": 8, "k": 2, "seed": 61, "data": "uniform"}
    data, out = _run_helper(reference, moe_helper, case, bug="nudged")
    expected = reference.ref_kernel(tuple(t.clone() for t in data))
    summary, evidence, key = reference.diagnose_failure(data, out, expected, 2e-2, 2e-2)
    assert key == "localised" and "Stage" not in summary, (summary, evidence)
    assert any("not weighed" in line and "requant_skipped" in line for line in evidence), evidence


def test_tensorrt_llms_bf16_atomic_finalize_is_accepted_on_every_test_case(reference, moe_helper):
    """TensorRT-LLM's fused finalize adds each weighted expert output atomically into the bf16 output: every
    partial sum is rounded to bf16 (7 of 8 tests rejected it before this profile). A 1 % error still leaves the
    envelope on the cases with k <= 2 (with k >= 4 the band of k - 1 bf16 roundings is about as wide)."""
    import yaml
    tests = yaml.safe_load(open(os.path.join(TASK, "task.yml")))["tests"]
    for case in tests:
        data, out = _run_helper(reference, moe_helper, case, precision=moe_helper.ATOMIC_BF16)
        assert not bool(reference.moe_envelope.outside(data, out).any()), case
    data, out = _run_helper(reference, moe_helper, SMALL, bug="nudged")
    assert bool(reference.moe_envelope.outside(data, out).any())


def test_no_remap_is_named_that_one_row_tile_hides(reference, moe_helper):
    """With every weight's scale rows in one 128-row tile, a wrong row-tile stride reads the reference's own
    bytes: on a 1 % error it is an accusation the case cannot support, never named nor weighed."""
    case = {"t": 16, "h": 64, "i": 64, "e": 4, "k": 2, "seed": 3}
    data, hidden = _run_helper(reference, moe_helper, case, bug="sf_k_as_index")
    expected = reference.ref_kernel(tuple(t.clone() for t in data))
    assert not bool(reference.moe_envelope.outside(data, hidden).any())     # the premise: it equals the reference
    data, out = _run_helper(reference, moe_helper, case, bug="nudged")
    summary, evidence, key = reference.diagnose_failure(data, out, expected, 2e-2, 2e-2)
    assert "Stage" not in summary and "row-tile stride" not in summary, (summary, evidence)
    assert not any("sf_k_as_index" in line and "not weighed" not in line for line in evidence), evidence


@pytest.mark.parametrize("bug", [None, "nudged"])
def test_the_envelope_judges_the_same_one_pair_at_a_time(reference, moe_helper, monkeypatch, bug):
    """Large shapes take the (h, act) pairs one at a time (CHUNK_BYTES), the tests all nine at once: the same
    elements are outside either way."""
    data, out = _run_helper(reference, moe_helper, SMALL, bug=bug, precision=moe_helper.VLLM)
    at_once = reference.moe_envelope.outside(data, out)
    monkeypatch.setattr(reference.moe_envelope, "CHUNK_BYTES", 1)
    assert torch.equal(reference.moe_envelope.outside(data, out), at_once)
    assert bool(at_once.any()) == (bug is not None)
