"""Every task's reference.py and the shared utils.py export the names the competition's files export
(gpu-mode/reference-kernels problems/nvidia/<task>/reference.py and problems/nvidia/utils.py), because
submissions import them (`from reference import to_blocked`), and the helpers behave the same: same bytes
from `to_blocked`, the same random calls from the group gemm's helpers.

The expectations below are computed independently (byte offsets of the cuBLAS 128x4 block-scale layout).
"""
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from arena.nvfp4 import generators
from tests.evalrun import ROOT

FOLDERS = {"nvfp4_gemm": Path(ROOT), **{name: Path(ROOT) / "tasks" / name
                                        for name in ("nvfp4_gemv", "nvfp4_dual_gemm", "nvfp4_group_gemm")}}
# Module-level names of the official reference.py files (functions, constants and imported names).
COMMON = {"torch", "input_t", "output_t", "make_match_reference", "sf_vec_size", "ceil_div", "to_blocked",
          "ref_kernel", "generate_input", "check_implementation"}
OFFICIAL_REFERENCE = {name: set(COMMON) for name in FOLDERS}
OFFICIAL_REFERENCE["nvfp4_group_gemm"] |= {"create_reordered_scale_factor_tensor", "_create_fp4_tensors"}
# Module-level names of the official utils.py (shared, and the group gemm's own copy).
OFFICIAL_UTILS = {"os", "random", "np", "torch", "set_seed", "get_device", "verbose_allclose", "verbose_allequal",
                  "match_reference", "make_match_reference", "DeterministicContext", "clear_l2_cache",
                  "clear_l2_cache_large"}

_loaded = {}


@pytest.fixture(autouse=True)
def generate_on_the_cpu(monkeypatch):
    monkeypatch.setattr(generators, "default_device", lambda: "cpu")


def load(task: str, file: str = "reference"):
    """A task's file as its own module, its `from task import ...` resolved in the task's folder."""
    if (task, file) not in _loaded:
        saved = {key: sys.modules.pop(key, None) for key in ("task", "reference", "utils")}
        try:
            for name in ("task", file):
                path = FOLDERS[task] / f"{name}.py"
                if name == "utils":
                    path = Path(ROOT) / "utils.py"
                spec = importlib.util.spec_from_file_location(name, path)
                module = importlib.util.module_from_spec(spec)
                sys.modules[name] = module
                spec.loader.exec_module(module)
            _loaded[(task, file)] = module
        finally:
            for key, value in saved.items():
                sys.modules.pop(key, None)
                if value is not None:
                    sys.modules[key] = value
    return _loaded[(task, file)]


def blocked_bytes(plain: np.ndarray) -> np.ndarray:
    """Independent 128x4 block-scale layout: scale (r, c) of an R x C matrix (R % 128 == C % 4 == 0) at
    ((r // 128) * (C / 4) + c // 4) * 512 + (r % 32) * 16 + ((r % 128) // 32) * 4 + c % 4."""
    rows, cols = plain.shape
    out = np.zeros(rows * cols, dtype=plain.dtype)
    for r in range(rows):
        for c in range(cols):
            out[((r // 128) * (cols // 4) + c // 4) * 512 + (r % 32) * 16 + ((r % 128) // 32) * 4 + c % 4] = plain[r, c]
    return out


def e4m3(rows: int, cols: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 0x7f, (rows, cols), dtype=torch.uint8, generator=g).view(torch.float8_e4m3fn)


@pytest.mark.parametrize("task", FOLDERS)
def test_reference_exports_every_official_name(task):
    missing = OFFICIAL_REFERENCE[task] - set(vars(load(task)))
    assert not missing, f"{task}/reference.py lacks {sorted(missing)}"


@pytest.mark.parametrize("task", FOLDERS)
def test_utils_exports_every_official_name(task):
    missing = OFFICIAL_UTILS - set(vars(load(task, "utils")))
    assert not missing, f"utils.py lacks {sorted(missing)}"


@pytest.mark.parametrize("task", FOLDERS)
def test_constants_and_ceil_div(task):
    ref = load(task)
    assert ref.sf_vec_size == 16 and isinstance(ref.sf_vec_size, int)
    assert [ref.ceil_div(a, b) for a, b in ((7, 2), (8, 2), (1, 128), (129, 128), (0, 4))] == [4, 4, 1, 2, 0]


@pytest.mark.parametrize("task", FOLDERS)
@pytest.mark.parametrize("rows, cols", [(128, 4), (256, 8), (384, 28)])
def test_to_blocked_gives_the_official_bytes(task, rows, cols):
    plain = e4m3(rows, cols, seed=rows + cols)
    flat = load(task).to_blocked(plain)
    assert flat.dim() == 1 and flat.dtype == torch.float8_e4m3fn
    assert np.array_equal(flat.view(torch.uint8).numpy(), blocked_bytes(plain.view(torch.uint8).numpy()))


def test_to_blocked_takes_a_batch_slice_of_the_competitions_scales():
    """The reference calls to_blocked(sfa[:, :, l]) on scales made as (l, mn, sf_k).permute(1, 2, 0)."""
    sf = e4m3(2 * 256, 8, seed=3).reshape(2, 256, 8).permute(1, 2, 0)
    for task in FOLDERS:
        flat = load(task).to_blocked(sf[:, :, 1])
        assert np.array_equal(flat.view(torch.uint8).numpy(), blocked_bytes(sf[:, :, 1].view(torch.uint8).numpy()))


@pytest.mark.parametrize("task", ["nvfp4_gemm", "nvfp4_gemv", "nvfp4_dual_gemm"])
def test_to_blocked_refuses_to_pad_like_the_official_one(task):
    """These tasks' official to_blocked cannot pad: an irregular shape raises there, and here."""
    with pytest.raises((ValueError, RuntimeError)):
        load(task).to_blocked(e4m3(40, 4, seed=1))


def test_group_gemm_to_blocked_pads_with_zeros_like_the_official_one():
    rows, cols = 40, 6
    plain = e4m3(rows, cols, seed=5)
    padded = np.zeros((128, 8), dtype=np.uint8)
    padded[:rows, :cols] = plain.view(torch.uint8).numpy()
    flat = load("nvfp4_group_gemm").to_blocked(plain)
    assert np.array_equal(flat.view(torch.uint8).numpy(), blocked_bytes(padded))


def test_create_reordered_scale_factor_tensor_matches_the_official_helper():
    """Signature (l, mn, k, ref_f8_tensor); one randint(1, 3, (l, ceil(mn/128), ceil(k/64), 32, 4, 4), int8)
    for the padding; the result is that buffer permuted (3, 4, 1, 5, 2, 0) with the scales placed."""
    ref = load("nvfp4_group_gemm")
    l, mn, k = 1, 200, 512
    sf = torch.randint(1, 3, (l, mn, k // 16), dtype=torch.int8).to(torch.float8_e4m3fn).permute(1, 2, 0)
    torch.manual_seed(11)
    out = ref.create_reordered_scale_factor_tensor(l, mn, k, sf)
    torch.manual_seed(11)
    buffer = torch.randint(1, 3, (l, 2, 8, 32, 4, 4), dtype=torch.int8).to(torch.float8_e4m3fn)
    assert out.shape == (32, 4, 2, 4, 8, l) and out.dtype == torch.float8_e4m3fn
    assert out.stride() == buffer.permute(3, 4, 1, 5, 2, 0).stride()
    expected = buffer.view(torch.uint8).clone()
    plain = sf.view(torch.uint8)
    for i in range(mn):
        for j in range(k // 16):
            expected[0, i // 128, j // 4, i % 32, (i % 128) // 32, j % 4] = plain[i, j, 0]
    assert torch.equal(out.permute(5, 2, 4, 0, 1, 3).view(torch.uint8), expected)


def test_create_fp4_tensors_matches_the_official_helper():
    """One randint(255, (l, mn, k/2), uint8), masked with 0b1011_1011, permuted to [mn, k/2, l] as fp4x2."""
    torch.manual_seed(4)
    out = load("nvfp4_group_gemm")._create_fp4_tensors(1, 72, 256)
    torch.manual_seed(4)
    raw = torch.randint(255, size=(1, 72, 128), dtype=torch.uint8) & 0b1011_1011
    assert out.dtype == torch.float4_e2m1fn_x2 and out.shape == (72, 128, 1) and out.stride() == (128, 1, 72 * 128)
    assert torch.equal(out.view(torch.uint8), raw.permute(1, 2, 0))


def test_group_gemm_generate_input_is_built_from_the_official_helpers():
    """generate_input's reordered scales equal create_reordered_scale_factor_tensor on the same random stream."""
    ref = load("nvfp4_group_gemm")
    abc, sf, reordered, _ = ref.generate_input((72,), (128,), (256,), 1, seed=21)
    torch.manual_seed(21)
    a = ref._create_fp4_tensors(1, 72, 256)
    b = ref._create_fp4_tensors(1, 128, 256)
    torch.randn((1, 72, 128), dtype=torch.float16)
    sfa = torch.randint(1, 3, (1, 72, 16), dtype=torch.int8).to(torch.float8_e4m3fn).permute(1, 2, 0)
    sfb = torch.randint(1, 3, (1, 128, 16), dtype=torch.int8).to(torch.float8_e4m3fn).permute(1, 2, 0)
    sfa_r = ref.create_reordered_scale_factor_tensor(1, 72, 256, sfa)
    sfb_r = ref.create_reordered_scale_factor_tensor(1, 128, 256, sfb)
    for got, want in zip((*abc[0][:2], *sf[0], *reordered[0]), (a, b, sfa, sfb, sfa_r, sfb_r)):
        assert torch.equal(got.view(torch.uint8), want.view(torch.uint8))
