"""The competition's other NVFP4 tasks (tasks/nvfp4_gemv, tasks/nvfp4_dual_gemm, tasks/nvfp4_group_gemm):
each generator's contract, each reference against an independent fp64 computation, the checks, the random
call order, and eval.py end to end as a real subprocess with the example and a wrong submission per task.

The runs over the full official test lists take minutes on a CPU: they are marked slow and run only with
ARENA_SLOW=1 (`ARENA_SLOW=1 python -m pytest -q tests/test_tasks.py`).
"""
import math
import os
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.overrides import TorchFunctionMode

from arena.nvfp4 import generators
from arena.nvfp4.layouts import ceil_div, from_permuted, permuted_batch_bytes, to_blocked
from arena.taskdef.specs import parse_spec_line
from arena.taskdef.definition import load_task
from tests.evalrun import ROOT, run_eval, spec_file
from tests.taskload import task_reference

TASKS = Path(ROOT) / "tasks"
EXAMPLES = {name: str(TASKS / name / "torch_submission.py") for name in
            ("nvfp4_gemv", "nvfp4_dual_gemm", "nvfp4_group_gemm")}
EXAMPLES["nvfp4_gemm"] = os.path.join(ROOT, "submissions", "torch_reference.py")
TASK_DIRS = {"nvfp4_gemm": ROOT, **{name: str(TASKS / name) for name in EXAMPLES if name != "nvfp4_gemm"}}
slow = pytest.mark.skipif(not os.environ.get("ARENA_SLOW"), reason="full official lists: set ARENA_SLOW=1")

_loaded = {}


@pytest.fixture(autouse=True)
def generate_on_the_cpu(monkeypatch):
    """Unit tests check the CPU contract and exact fp64 results, also on a machine with a GPU (where the
    generators would otherwise use CUDA); the eval.py subprocesses below use whatever the machine has."""
    monkeypatch.setattr(generators, "default_device", lambda: "cpu")


def load_reference(name: str):
    """A task's reference.py as its own module (its `from task import ...` gets that task's task.py)."""
    if name not in _loaded:
        with task_reference(str(TASKS / name)) as module:
            _loaded[name] = module
    return _loaded[name]


# ---- an independent decoder: e2m1 from its bits, numpy, fp64 ----------------------------------------

def e2m1(code: int) -> float:
    sign = -1.0 if code & 0b1000 else 1.0
    exponent, mantissa = (code >> 1) & 0b11, code & 1
    magnitude = mantissa * 0.5 if exponent == 0 else (1 + mantissa / 2) * 2.0 ** (exponent - 1)
    return sign * magnitude


E2M1 = np.array([e2m1(c) for c in range(16)])


def dequant64(packed: torch.Tensor, scales: torch.Tensor) -> np.ndarray:
    raw = packed.view(torch.uint8).cpu().numpy().astype(np.int64)
    codes = np.empty(raw.shape[:-1] + (raw.shape[-1] * 2,), dtype=np.int64)
    codes[..., 0::2], codes[..., 1::2] = raw % 16, raw // 16          # element 0: low nibble
    return E2M1[codes] * np.repeat(scales.float().cpu().numpy().astype(np.float64), 16, axis=-1)


def gemm64(a, b, sfa, sfb) -> np.ndarray:
    return dequant64(a, sfa) @ dequant64(b, sfb).T


def bits(x: torch.Tensor) -> torch.Tensor:
    return x.contiguous().view(torch.int16)


def nibbles(packed: torch.Tensor) -> tuple[set, set]:
    raw = packed.view(torch.uint8)
    return set((raw & 15).unique().tolist()), set((raw >> 4).unique().tolist())


def values(t: torch.Tensor) -> set:
    return set(t.float().unique().tolist())


def clone(data):
    if isinstance(data, (tuple, list)):
        return type(data)(clone(x) for x in data)
    return data.clone() if isinstance(data, torch.Tensor) else data


def k_major(t: torch.Tensor, rows: int, cols: int, l: int):
    """Shape [rows, cols, l] made as (l, rows, cols).permute(1, 2, 0)."""
    return tuple(t.shape) == (rows, cols, l) and t.stride() == (cols, 1, rows * cols)


# ---- the random calls, in order, with the device each was meant for ------------------------------------

class RandomCalls(TorchFunctionMode):
    """Records torch's random factory calls; 'cuda' is rewritten to 'cpu' so it runs without a GPU."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        device = str(kwargs.get("device", "cpu"))
        if device.startswith("cuda"):
            kwargs["device"] = "cpu"
        name = getattr(func, "__name__", "")
        if name in ("randint", "randn", "rand", "randperm", "random_", "normal_", "uniform_"):
            self.calls.append((name, *[tuple(a) if isinstance(a, torch.Size) else a for a in args],
                               kwargs.get("dtype"), device))
        if name == "to" and any(str(a).startswith("cuda") for a in args):
            args = tuple("cpu" if str(a).startswith("cuda") else a for a in args)
        return func(*args, **kwargs)


def random_calls(task: str, monkeypatch, **args) -> list:
    monkeypatch.setattr(generators, "default_device", lambda: "cuda")
    with RandomCalls() as recorder:
        load_reference(task).generate_input(**args)
    return recorder.calls


U8, I8, F16, F32 = torch.uint8, torch.int8, torch.float16, torch.float32


def test_random_calls_follow_the_official_order(monkeypatch):
    """The official generators' calls (function, range, shape, dtype, device) in their order: on CUDA the
    same seed then gives the same tensors. Written from the competition's generate_input functions."""
    assert random_calls("nvfp4_gemv", monkeypatch, m=128, k=256, l=2, seed=1) == [
        ("randint", 0, 4, (2, 128, 128), U8, "cuda"),           # a
        ("randint", 0, 4, (2, 128, 128), U8, "cuda"),           # b, padded to 128 rows
        ("randn", (2, 128, 1), F16, "cuda"),                    # c
        ("randint", 0, 3, (2, 128, 16), I8, "cuda"),            # sfa
        ("randint", 0, 3, (2, 1, 4, 32, 4, 4), I8, "cuda"),     # sfa_permuted padding
        ("randint", 0, 3, (2, 128, 16), I8, "cuda"),            # sfb
        ("randint", 0, 3, (2, 1, 4, 32, 4, 4), I8, "cuda")]     # sfb_permuted padding
    assert random_calls("nvfp4_dual_gemm", monkeypatch, m=256, n=128, k=512, l=1, seed=1) == [
        ("randint", 0, 255, (1, 256, 256), U8, "cuda"),         # a, then & 0xBB
        ("randint", 0, 255, (1, 128, 256), U8, "cuda"),         # b1
        ("randint", 0, 255, (1, 128, 256), U8, "cuda"),         # b2
        ("randn", (1, 256, 128), F16, "cuda"),                  # c
        ("rand", (1, 256, 32), F32, "cuda"),                    # sfa (permuted padding: torch.empty there)
        ("rand", (1, 128, 32), F32, "cuda"),                    # sfb1
        ("rand", (1, 128, 32), F32, "cuda")]                    # sfb2
    calls = random_calls("nvfp4_group_gemm", monkeypatch, m=(40, 200), n=(128, 256), k=(256, 512), g=2, seed=1)
    per_group = lambda m, n, k: [                                # noqa: E731
        ("randint", 0, 255, (1, m, k // 2), U8, "cuda"),        # a
        ("randint", 0, 255, (1, n, k // 2), U8, "cuda"),        # b
        ("randn", (1, m, n), F16, "cuda"),                      # c
        ("randint", 1, 3, (1, m, k // 16), I8, "cpu"),          # sfa: the CPU generator
        ("randint", 1, 3, (1, n, k // 16), I8, "cpu"),          # sfb
        ("randint", 1, 3, (1, ceil_div(m, 128), k // 64, 32, 4, 4), I8, "cuda"),   # sfa_reordered padding
        ("randint", 1, 3, (1, ceil_div(n, 128), k // 64, 32, 4, 4), I8, "cuda")]   # sfb_reordered padding
    assert calls == per_group(40, 128, 256) + per_group(200, 256, 512)


def test_generators_are_deterministic_and_seeded():
    for name, args in (("nvfp4_gemv", dict(m=128, k=256, l=1)), ("nvfp4_dual_gemm", dict(m=128, n=128, k=256, l=1)),
                       ("nvfp4_group_gemm", dict(m=(40,), n=(128,), k=(256,), g=1))):
        ref = load_reference(name)
        first, again, other = (ref.generate_input(**args, seed=s) for s in (5, 5, 6))
        a1, a2, a3 = (x[0][0][0] if name == "nvfp4_group_gemm" else x[0] for x in (first, again, other))
        assert torch.equal(a1.view(torch.uint8), a2.view(torch.uint8))
        assert not torch.equal(a1.view(torch.uint8), a3.view(torch.uint8))


# ---- gemv --------------------------------------------------------------------------------------------

def test_gemv_follows_the_official_contract():
    m, k, l = 384, 512, 2
    a, b, sfa, sfb, sfa_p, sfb_p, c = load_reference("nvfp4_gemv").generate_input(m, k, l, seed=1)
    assert k_major(a, m, k // 2, l) and a.dtype == torch.float4_e2m1fn_x2
    assert k_major(b, 128, k // 2, l) and b.dtype == torch.float4_e2m1fn_x2       # N padded to 128 rows
    assert k_major(sfa, m, k // 16, l) and k_major(sfb, 128, k // 16, l) and sfb.dtype == torch.float8_e4m3fn
    assert sfa_p.shape == (32, 4, 3, 4, k // 64, l) and sfb_p.shape == (32, 4, 1, 4, k // 64, l)
    assert (c.shape, c.stride(), c.dtype) == ((m, 1, l), (1, 1, m), torch.float16)
    assert all(t.device.type == "cpu" for t in (a, b, sfa, sfb, sfa_p, sfb_p, c))       # see the fixture
    # Bytes 0..3: the low nibble holds codes 0-3, the high nibble is always 0. Scales {0, 1, 2}.
    assert nibbles(a) == ({0, 1, 2, 3}, {0}) and nibbles(b) == ({0, 1, 2, 3}, {0})
    assert values(sfa) == {0.0, 1.0, 2.0} and values(sfb) == {0.0, 1.0, 2.0}
    assert torch.equal(from_permuted(sfa_p, m, k // 16).view(torch.uint8), sfa.view(torch.uint8))
    assert torch.equal(from_permuted(sfb_p, 128, k // 16).view(torch.uint8), sfb.view(torch.uint8))
    for batch in range(l):     # each batch of the permuted tensor IS the blocked layout in memory
        assert torch.equal(permuted_batch_bytes(sfa_p, batch).view(torch.uint8),
                           to_blocked(sfa[:, :, batch]).view(torch.uint8))
    assert c.abs().sum() > 0                                                        # pre-filled


def test_gemv_permuted_padding_is_random_like_the_competition():
    m, k = 192, 256                       # 64 padding rows in the second 128-row tile
    _, _, sfa, _, sfa_p, _, _ = load_reference("nvfp4_gemv").generate_input(m, k, 1, seed=3)
    full = from_permuted(sfa_p, 256, k // 16)
    assert torch.equal(full[:m].view(torch.uint8), sfa.view(torch.uint8))
    assert values(full[m:]) == {0.0, 1.0, 2.0}


@pytest.mark.parametrize("m,k,l,data", [(128, 256, 1, "official"), (256, 1536, 2, "official"),
                                        (128, 512, 2, "allcodes"), (384, 256, 1, "quantized"), (640, 192, 1, "official")])
def test_gemv_reference_is_bit_identical_to_independent_fp64(m, k, l, data):
    ref = load_reference("nvfp4_gemv")
    a, b, sfa, sfb, _, _, c = inputs = ref.generate_input(m, k, l, seed=m + k + l, data=data)
    want = np.stack([dequant64(a[:, :, i], sfa[:, :, i]) @ dequant64(b[0, :, i], sfb[0, :, i]) for i in range(l)], -1)
    got = ref.ref_kernel(clone(inputs))
    assert got.shape == (m, 1, l)
    assert torch.equal(bits(got[:, 0, :]), bits(torch.from_numpy(want).to(torch.float16)))


def test_gemv_uses_only_row_0_of_the_padded_vector():
    ref = load_reference("nvfp4_gemv")
    inputs = ref.generate_input(256, 512, 2, seed=4)
    expected = ref.ref_kernel(clone(inputs)).clone()
    changed = list(clone(inputs))
    changed[1].view(torch.uint8)[1:] = 0x77                 # rows 1..127 of b and sfb: padding
    changed[3].view(torch.uint8)[1:] = 0x38
    assert torch.equal(ref.ref_kernel(tuple(changed)), expected)


def test_gemv_check_names_contract_breaks_and_wrong_values():
    ref = load_reference("nvfp4_gemv")
    inputs = ref.generate_input(128, 256, 1, seed=5)
    untouched = inputs[6].clone()                 # the reference writes into c, as the competition's does
    good = ref.ref_kernel(clone(inputs)).clone()
    assert ref.check_implementation(inputs, good.clone()) == (True, "")
    ok, message = ref.check_implementation(inputs, good[:, 0, :].clone())
    assert not ok and message == "output shape is [128, 1], expected [128, 1, 1]"
    assert ref.check_implementation(inputs, good.float()) == (True, "")      # values only, as the competition
    assert "output dtype is torch.float32" in ref.check_implementation.compare(inputs, good.float(), strict=True).problem
    ok, message = ref.check_implementation(inputs, untouched)             # c returned untouched
    assert not ok and "Number of mismatched elements" in message


# ---- dual gemm -----------------------------------------------------------------------------------

def test_dual_gemm_follows_the_official_contract():
    m, n, k, l = 256, 384, 512, 2
    data = load_reference("nvfp4_dual_gemm").generate_input(m, n, k, l, seed=1)
    assert len(data) == 10
    a, b1, b2, sfa, sfb1, sfb2, sfa_p, sfb1_p, sfb2_p, c = data
    assert k_major(a, m, k // 2, l) and k_major(b1, n, k // 2, l) and k_major(b2, n, k // 2, l)
    assert {t.dtype for t in (a, b1, b2)} == {torch.float4_e2m1fn_x2}
    assert k_major(sfa, m, k // 16, l) and k_major(sfb1, n, k // 16, l) and k_major(sfb2, n, k // 16, l)
    assert {t.dtype for t in (sfa, sfb1, sfb2, sfa_p, sfb1_p, sfb2_p)} == {torch.float8_e4m3fn}
    assert sfa_p.shape == (32, 4, 2, 4, k // 64, l) and sfb1_p.shape == (32, 4, 3, 4, k // 64, l)
    assert k_major(c, m, n, l) and c.dtype == torch.float16 and c.abs().sum() > 0
    for plain, perm, rows in ((sfa, sfa_p, m), (sfb1, sfb1_p, n), (sfb2, sfb2_p, n)):
        assert torch.equal(from_permuted(perm, rows, k // 16).view(torch.uint8), plain.view(torch.uint8))
    # Codes {0-3, 8-11} on both nibbles = {0, ±0.5, ±1, ±1.5}; 2, 3, 4 and 6 never occur.
    for t in (a, b1, b2):
        assert nibbles(t) == ({0, 1, 2, 3, 8, 9, 10, 11},) * 2
    # Scales from torch.rand rounded to e4m3: within [0, 1], many distinct values, subnormals present.
    s = torch.cat([sfa.float().flatten(), sfb1.float().flatten()])
    assert s.min() >= 0 and s.max() <= 1 and len(values(s)) > 40 and ((s > 0) & (s < 2**-6)).any()
    assert not torch.equal(b1.view(torch.uint8), b2.view(torch.uint8))


def dual64(data) -> np.ndarray:
    a, b1, b2, sfa, sfb1, sfb2, _, _, _, c = data
    out = np.empty(tuple(c.shape))
    for i in range(c.shape[2]):
        gate, up = gemm64(a[:, :, i], b1[:, :, i], sfa[:, :, i], sfb1[:, :, i]), \
            gemm64(a[:, :, i], b2[:, :, i], sfa[:, :, i], sfb2[:, :, i])
        out[:, :, i] = gate / (1 + np.exp(-gate)) * up                 # all in fp64
    return out


@pytest.mark.parametrize("m,n,k,l,data", [(128, 128, 256, 1, "official"), (256, 128, 1024, 2, "official"),
                                          (128, 256, 512, 1, "quantized")])
def test_dual_gemm_reference_matches_independent_fp64_within_tolerance(m, n, k, l, data):
    ref = load_reference("nvfp4_dual_gemm")
    inputs = ref.generate_input(m, n, k, l, seed=m + n + k, data=data)
    got = ref.ref_kernel(clone(inputs))
    assert got.dtype == torch.float16 and got.shape == (m, n, l)
    assert got.data_ptr() != inputs[9].data_ptr()                      # a new tensor, not c
    want = torch.from_numpy(dual64(inputs))
    assert (got.double() - want).abs().le(1e-3 + 1e-3 * want.abs()).all()
    # The exact products rounded once to fp32, then silu and multiply in fp32: within an fp16 ulp of fp64.
    ulps = (got.double() - want).abs() / want.abs().clamp(min=2**-14) * 2**10
    assert ulps.max() <= 1.5


def test_dual_gemm_fp16_intermediates_fail_the_tolerance():
    """Both products rounded to fp16 before silu·mul fail rtol=atol=1e-3 (the first alone does too here)."""
    ref = load_reference("nvfp4_dual_gemm")
    inputs = ref.generate_input(128, 256, 2048, 1, seed=1)
    a, b1, b2, sfa, sfb1, sfb2, *_ = inputs
    gate, up = (torch.from_numpy(gemm64(a[:, :, 0], b[:, :, 0], sfa[:, :, 0], s[:, :, 0]))
                for b, s in ((b1, sfb1), (b2, sfb2)))
    epilogue = lambda g, u: (torch.nn.functional.silu(g.float()) * u.float()).half().unsqueeze(-1)  # noqa: E731
    assert ref.check_implementation(inputs, epilogue(gate, up)) == (True, "")
    for rounded in (epilogue(gate.half(), up.half()), epilogue(gate.half(), up)):
        ok, message = ref.check_implementation(inputs, rounded)
        assert not ok and "Number of mismatched elements" in message


def test_dual_gemm_rejects_allcodes_with_one_line():
    with pytest.raises(ValueError, match="not offered for dual gemm"):
        load_reference("nvfp4_dual_gemm").generate_input(128, 128, 256, 1, seed=1, data="allcodes")


# ---- group gemm ----------------------------------------------------------------------------------

def test_group_gemm_follows_the_official_contract():
    ms, ns, ks = (40, 56, 200), (256, 128, 384), (256, 512, 256)
    abc, sf, reordered, sizes = load_reference("nvfp4_group_gemm").generate_input(ms, ns, ks, 3, seed=1111)
    assert all(isinstance(x, list) and len(x) == 3 for x in (abc, sf, reordered, sizes))
    assert sizes == [(40, 256, 256, 1), (56, 128, 512, 1), (200, 384, 256, 1)]
    for (a, b, c), (sfa, sfb), (sfa_r, sfb_r), (m, n, k, l) in zip(abc, sf, reordered, sizes):
        assert k_major(a, m, k // 2, 1) and k_major(b, n, k // 2, 1) and a.dtype == b.dtype == torch.float4_e2m1fn_x2
        assert k_major(c, m, n, 1) and c.dtype == torch.float16 and c.abs().sum() > 0
        assert k_major(sfa, m, k // 16, 1) and k_major(sfb, n, k // 16, 1)
        assert sfa.device.type == sfb.device.type == "cpu"          # plain scales live on the CPU
        assert sfa_r.shape == (32, 4, ceil_div(m, 128), 4, k // 64, 1) and sfb_r.shape == (32, 4, ceil_div(n, 128), 4, k // 64, 1)
        assert {sfa.dtype, sfa_r.dtype} == {torch.float8_e4m3fn}
        assert nibbles(a) == ({0, 1, 2, 3, 8, 9, 10, 11},) * 2
        assert values(sfa) == values(sfb) == {1.0, 2.0}
        assert torch.equal(from_permuted(sfa_r, m, k // 16).view(torch.uint8), sfa.view(torch.uint8))
        assert torch.equal(from_permuted(sfb_r, n, k // 16).view(torch.uint8), sfb.view(torch.uint8))


def test_group_gemm_reordered_padding_is_random_ones_and_twos():
    ms = (40, 72)
    _, sf, reordered, _ = load_reference("nvfp4_group_gemm").generate_input(ms, (128, 128), (512, 512), 2, seed=9)
    for m, (sfa, _), (sfa_r, _) in zip(ms, sf, reordered):
        full = from_permuted(sfa_r, 128, 32)
        assert torch.equal(full[:m].view(torch.uint8), sfa.view(torch.uint8))
        assert values(full[m:]) == {1.0, 2.0}            # random 1.0 / 2.0 as the competition's, not zeros


def group64(data) -> list:
    abc, sf, _, _ = data
    return [torch.from_numpy(gemm64(a[:, :, 0], b[:, :, 0], sfa[:, :, 0], sfb[:, :, 0])).to(torch.float16)
            for (a, b, _), (sfa, sfb) in zip(abc, sf)]


@pytest.mark.parametrize("ms,ns,ks,data", [((96, 128), (128, 256), (256, 512), "official"),
                                           ((40, 56, 200), (512, 384, 128), (256, 256, 512), "official"),
                                           ((40, 136), (256, 128), (512, 256), "allcodes"),
                                           ((72, 264), (128, 256), (256, 256), "quantized")])
def test_group_gemm_reference_is_bit_identical_to_independent_fp64(ms, ns, ks, data):
    ref = load_reference("nvfp4_group_gemm")
    inputs = ref.generate_input(ms, ns, ks, len(ms), seed=sum(ms), data=data)
    got = ref.ref_kernel(clone(inputs))
    assert isinstance(got, list) and len(got) == len(ms)
    for out, want, m, n in zip(got, group64(inputs), ms, ns):
        assert out.shape == (m, n, 1) and torch.equal(bits(out[:, :, 0]), bits(want))


def test_group_gemm_check_covers_the_list_and_every_group():
    ref = load_reference("nvfp4_group_gemm")
    inputs = ref.generate_input((40, 128), (128, 256), (256, 256), 2, seed=2)
    good = [c.clone() for c in ref.ref_kernel(clone(inputs))]
    check = lambda out: ref.check_implementation(inputs, out)      # noqa: E731
    assert check([c.clone() for c in good]) == (True, "")
    assert check(tuple(c.clone() for c in good)) == (True, "")       # the competition accepts any sequence
    assert check([]) == (False, "custom_kernel returned 0 tensors, expected 2 (one per group)")
    assert check(good[:1]) == (False, "custom_kernel returned 1 tensors, expected 2 (one per group)")
    assert check(good[0])[1].startswith("custom_kernel returned Tensor, expected a list of 2 tensors")
    assert check([good[0], good[1].float()]) == (True, "")         # values only, as the competition
    assert ref.check_implementation.compare(inputs, [good[0], good[1].float()], strict=True).problem == (
        "group 1: output dtype is torch.float32, expected torch.float16 (its values match the reference: the "
        "competition, which compares values only, would pass it)")
    assert ref.check_implementation.compare(inputs, [good[0], good[1].float()]).warnings == [
        "group 1: output dtype is torch.float32, expected torch.float16: compared by value, as the competition does "
        "(--strict refuses it)"]
    assert check([good[0][:32], good[1]]) == (False, "group 0: output shape is [32, 128, 1], expected [40, 128, 1]")
    wrong = [c.clone() for c in good]
    wrong[1][3, 5, 0] += 1
    ok, message = check(wrong)
    assert not ok and "group 1: Number of mismatched elements: 1" in message and "ERROR AT (3, 5, 0)" in message


def test_group_gemm_sizes_must_list_one_value_per_group():
    with pytest.raises(ValueError, match=r"m must list one size per group \(g = 2\)"):
        load_reference("nvfp4_group_gemm").generate_input((40,), (128, 128), (256, 256), 2, seed=1)


def test_group_gemm_task_yml_lists_become_tuples_and_specs_echo_the_official_format():
    task = load_task(TASK_DIRS["nvfp4_group_gemm"])
    case = task.cases("tests")[0]
    assert case.spec == "m: [96, 128]; n: [128, 256]; k: [256, 512]; g: 2; seed: 1111"
    assert case.args == {"m": (96, 128), "n": (128, 256), "k": (256, 512), "g": 2, "seed": 1111}
    bench = task.cases("benchmarks")[2]
    assert bench.spec == "m: [192, 320]; n: [3072, 3072]; k: [4096, 4096]; g: 2; seed: 1111"
    assert task.speed_of_light_us({"m": (192, 320), "n": (3072, 3072), "k": (4096, 4096), "g": 2, "seed": 7}) == 2.406


@pytest.mark.parametrize("name,tests,benchmarks", [("nvfp4_gemv", 10, 3), ("nvfp4_dual_gemm", 10, 4),
                                                   ("nvfp4_group_gemm", 10, 4)])
def test_task_yml_holds_the_official_lists_and_a_speed_of_light_per_benchmark(name, tests, benchmarks):
    task = load_task(TASK_DIRS[name])
    assert len(task.cases("tests")) == tests and len(task.cases("benchmarks")) == benchmarks
    assert all(c.args["seed"] == 1111 for c in task.cases("tests") + task.cases("benchmarks"))
    assert all(c.extra["sol_us"] > 0 for c in task.cases("benchmarks"))
    assert task.tolerance == {"rtol": 1e-3, "atol": 1e-3} and len(task.cases("robustness")) >= 3


def test_group_gemm_speed_of_light_uses_the_average_group():
    """The competition's SOL for group gemm uses the average M, N, K; spot-check its DRAM-bound magnitude."""
    task = load_task(TASK_DIRS["nvfp4_group_gemm"])
    first = task.cases("benchmarks")[0]
    g, (m, n, k) = first.args["g"], (sum(first.args[x]) / first.args["g"] for x in "mnk")
    bytes_moved = g * ((m + n) * k / 2 + (m + n) * k / 16 + 2 * m * n)
    assert math.isclose(bytes_moved / (first.extra["sol_us"] * 1e-6) / 1e12, 8.0, rel_tol=0.1)   # ~8 TB/s


# ---- eval.py end to end (real subprocesses) ------------------------------------------------------

SMALL_SPECS = {
    "nvfp4_gemm": "m: 128; n: 256; k: 256; l: 1; seed: 1111\nm: 128; n: 384; k: 512; l: 2; seed: 5\n",
    "nvfp4_gemv": "m: 128; k: 256; l: 1; seed: 1111\nm: 384; k: 1536; l: 2; seed: 5\n",
    "nvfp4_dual_gemm": "m: 256; n: 512; k: 256; l: 1; seed: 1111\nm: 128; n: 256; k: 2048; l: 1; seed: 1\n",
    "nvfp4_group_gemm": "m: [96, 128]; n: [128, 256]; k: [256, 512]; g: 2; seed: 1111\n"
                        "m: [40, 56, 200]; n: [512, 384, 128]; k: [256, 256, 512]; g: 3; seed: 1111\n",
}

# One realistic bug per task, built on the task's own example (the worker puts the task folder on sys.path).
WRONG = {
    "nvfp4_gemm": ("""
        from submission_under_test import custom_kernel as correct
        def custom_kernel(data):
            a, *rest = data
            raw = a.view(torch.uint8)
            swapped = ((raw >> 4) | (raw << 4)).view(a.dtype)      # nibble order swapped on A only
            return correct((swapped, *rest))
        """, "Number of mismatched elements"),
    "nvfp4_gemv": ("""
        from torch_submission import custom_kernel as correct
        def custom_kernel(data):
            a, b, sfa, sfb, *rest = data
            return correct((a, b[1:], sfa, sfb[1:], *rest))         # reads padding row 1 as the vector
        """, "Number of mismatched elements"),
    "nvfp4_dual_gemm": ("""
        from torch_submission import _dequantize
        def custom_kernel(data):
            a, b1, b2, sfa, sfb1, sfb2, _, _, _, c = data
            x = _dequantize(a[:, :, 0], sfa[:, :, 0], torch.float64)
            gate = (x @ _dequantize(b1[:, :, 0], sfb1[:, :, 0], torch.float64).T).half()   # fp16 intermediates
            up = (x @ _dequantize(b2[:, :, 0], sfb2[:, :, 0], torch.float64).T).half()
            c[:, :, 0] = (torch.nn.functional.silu(gate.float()) * up.float()).half()
            return c
        """, "Number of mismatched elements"),
    "nvfp4_group_gemm": ("""
        from torch_submission import custom_kernel as correct
        def custom_kernel(data):
            return correct(data)[:-1]                               # forgets the last group
        """, "expected {g} (one per group)"),
}


def small_and_robustness(name: str) -> str:
    """The small cases plus the task's robustness set, as spec lines (one eval.py run covers both)."""
    extra = [c.spec for c in load_task(TASK_DIRS[name]).cases("robustness")] if name != "nvfp4_gemm" else []
    return SMALL_SPECS[name] + "".join(line + "\n" for line in extra)


@pytest.mark.parametrize("name", list(SMALL_SPECS))
def test_example_submission_passes_through_the_official_protocol(name):
    text = small_and_robustness(name)
    run = run_eval("test", spec_file(text), "--task", TASK_DIRS[name], "--submission", EXAMPLES[name],
                   popcorn=True, timeout=120)
    assert run.code == 0, run.stderr + run.raw
    lines = text.splitlines()
    assert run.keys["test-count"] == str(len(lines)) and run.keys["check"] == "pass"
    for i, line in enumerate(lines):
        assert run.keys[f"test.{i}.spec"] == line and run.keys[f"test.{i}.status"] == "pass"


@pytest.mark.parametrize("name", list(WRONG))
def test_a_wrong_submission_fails_with_one_clear_line(name, tmp_path):
    body, fragment = WRONG[name]
    source = "import torch\n" + textwrap.dedent(body)
    if name == "nvfp4_gemm":
        (tmp_path / "submission_under_test.py").write_text(Path(EXAMPLES[name]).read_text())
    path = tmp_path / f"wrong_{name}.py"
    path.write_text(source)
    text = SMALL_SPECS[name]
    run = run_eval("test", spec_file(text), "--task", TASK_DIRS[name], "--submission", str(path),
                   popcorn=True, timeout=120)
    assert run.code == 112 and run.keys["check"] == "fail", run.stderr + run.raw
    for i, line in enumerate(text.splitlines()):
        g = parse_spec_line(line).get("g", 0)
        error = run.keys[f"test.{i}.error"]
        assert run.keys[f"test.{i}.status"] == "fail" and fragment.format(g=g) in error, error
        assert "\n" not in error


# The official lists from task.yml (no spec file): the cheap cases here, all of them under ARENA_SLOW.
OFFICIAL_SUBSET = {"nvfp4_gemv": "0,1,7", "nvfp4_dual_gemm": "1,9", "nvfp4_group_gemm": None}


@pytest.mark.parametrize("name", list(OFFICIAL_SUBSET))
def test_example_submission_passes_official_tests_from_task_yml(name):
    only = ["--only", OFFICIAL_SUBSET[name]] if OFFICIAL_SUBSET[name] else []
    run = run_eval("test", "--task", TASK_DIRS[name], "--submission", EXAMPLES[name], *only, popcorn=True, timeout=300)
    assert run.code == 0 and run.keys["check"] == "pass", run.stderr + run.raw
    official = load_task(TASK_DIRS[name]).cases("tests")
    indices = [int(i) for i in OFFICIAL_SUBSET[name].split(",")] if OFFICIAL_SUBSET[name] else range(len(official))
    for i in indices:
        assert run.keys[f"test.{i}.spec"] == official[i].spec and run.keys[f"test.{i}.status"] == "pass"


# ---- the full official test lists (minutes on a CPU) ---------------------------------------------

@slow
@pytest.mark.slow
@pytest.mark.parametrize("name", list(EXAMPLES))
def test_example_submission_passes_the_official_tests(name):
    run = run_eval("test", "--task", TASK_DIRS[name], "--submission", EXAMPLES[name], popcorn=True, timeout=1800)
    assert run.code == 0, run.stderr + run.raw
    assert run.keys["test-count"] == "10" and run.keys["check"] == "pass"
