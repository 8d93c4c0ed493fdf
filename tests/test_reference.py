"""The nvfp4_gemm reference: the official input contract, and bit-exactness against an independent fp64 GEMM."""
import numpy as np
import pytest
import torch

import reference
from arena.nvfp4.layouts import ceil_div, from_permuted
from tests.test_formats import e2m1_from_bits

E2M1 = np.array([e2m1_from_bits(c) for c in range(16)])


def numpy_dequant(packed: torch.Tensor, scales: torch.Tensor) -> np.ndarray:
    """Independent decode: numpy, bit-derived table, nibbles split by integer arithmetic."""
    raw = packed.view(torch.uint8).numpy().astype(np.int64)
    codes = np.empty(raw.shape[:-1] + (raw.shape[-1] * 2,), dtype=np.int64)
    codes[..., 0::2], codes[..., 1::2] = raw % 16, raw // 16
    s = scales.float().numpy().astype(np.float64)
    return E2M1[codes] * np.repeat(s, 16, axis=-1)


def fp64_gemm(data) -> np.ndarray:
    a, b, sfa, sfb, _, _, c = data
    out = np.empty(tuple(c.shape), dtype=np.float64)
    for l in range(c.shape[2]):
        out[:, :, l] = numpy_dequant(a[:, :, l], sfa[:, :, l]) @ numpy_dequant(b[:, :, l], sfb[:, :, l]).T
    return out


@pytest.mark.parametrize("m,n,k,l", [(128, 256, 256, 1), (256, 384, 512, 2), (128, 128, 1536, 2), (384, 256, 768, 1)])
def test_reference_is_bit_identical_to_independent_fp64(m, n, k, l):
    data = reference.generate_input(m, n, k, l, seed=m + n + k + l)
    want = torch.from_numpy(fp64_gemm(data)).to(torch.float16)
    got = reference.ref_kernel(tuple(x.clone() for x in data))
    assert torch.equal(got.view(torch.int16), want.view(torch.int16))


def test_fp32_accumulation_is_exact_for_the_official_distribution():
    data = reference.generate_input(128, 128, 2048, 1, seed=3)
    exact = fp64_gemm(data)
    assert np.all(exact * 4 == np.round(exact * 4)) and np.abs(exact).max() < 2**22


def test_generate_input_follows_the_official_contract():
    m, n, k, l = 256, 384, 512, 2
    a, b, sfa, sfb, sfa_p, sfb_p, c = reference.generate_input(m, n, k, l, seed=1)
    assert (a.shape, a.stride(), a.dtype) == ((m, k // 2, l), (k // 2, 1, m * k // 2), torch.float4_e2m1fn_x2)
    assert (b.shape, b.stride()) == ((n, k // 2, l), (k // 2, 1, n * k // 2))
    assert (sfa.shape, sfa.stride(), sfa.dtype) == ((m, k // 16, l), (k // 16, 1, m * k // 16), torch.float8_e4m3fn)
    assert sfa_p.shape == (32, 4, ceil_div(m, 128), 4, ceil_div(k // 16, 4), l)
    assert (c.shape, c.stride(), c.dtype) == ((m, n, l), (n, 1, m * n), torch.float16)
    assert torch.equal(from_permuted(sfa_p, m, k // 16).view(torch.uint8), sfa.view(torch.uint8))
    assert torch.equal(from_permuted(sfb_p, n, k // 16).view(torch.uint8), sfb.view(torch.uint8))
    # Distributions: all 16 codes on both nibbles; scales exactly {0, 1, 2, 3}; c pre-filled (not zeros).
    raw = a.view(torch.uint8)
    assert len(torch.unique(raw & 15)) == 16 and len(torch.unique(raw >> 4)) == 16
    assert sorted(torch.unique(sfa.float()).tolist()) == [0.0, 1.0, 2.0, 3.0]
    assert c.float().abs().sum() > 0


def test_same_seed_same_tensors_and_other_seed_differs():
    x, y, z = (reference.generate_input(128, 256, 256, 1, seed=s) for s in (5, 5, 6))
    assert all(torch.equal(p.view(torch.uint8), q.view(torch.uint8)) for p, q in zip(x[:2], y[:2]))
    assert not torch.equal(x[0].view(torch.uint8), z[0].view(torch.uint8))


@pytest.mark.parametrize("dist", ["quantized", "allcodes"])
def test_robustness_distributions_match_fp64_within_tolerance(dist):
    data = reference.generate_input(128, 256, 512, 2, seed=4, data=dist)
    want = torch.from_numpy(fp64_gemm(data))
    got = reference.ref_kernel(tuple(x.clone() for x in data)).double()
    assert torch.allclose(got, want, rtol=1e-3, atol=1e-3)
    if dist == "quantized":   # fractional scales, unlike the official data
        assert (data[2].float() != data[2].float().round()).any()


def test_unknown_distribution_is_one_clear_error():
    with pytest.raises(ValueError, match="unknown data distribution 'gauss'"):
        reference.generate_input(128, 256, 256, 1, seed=1, data="gauss")


def check(data, out):
    return reference.check_implementation(data, out)


def test_check_accepts_the_right_answer_and_names_contract_breaks():
    data = reference.generate_input(128, 256, 256, 1, seed=2)
    right = reference.ref_kernel(tuple(x.clone() for x in data)).clone()
    assert check(data, right) == (True, "")
    # the competition compares values only: an fp32 result with the right values passes (the evaluator adds a
    # warning line); --strict's comparison names the dtype and whether the values match anyway
    assert check(data, right.float()) == (True, "")
    assert reference.check_implementation.compare(data, right.float(), strict=True).problem == (
        "output dtype is torch.float32, expected torch.float16 (its values match the reference: the competition, "
        "which compares values only, would pass it)")
    off = right.float()
    off[0, 0, 0] += 100
    assert not check(data, off)[0]
    assert reference.check_implementation.compare(data, off, strict=True).problem == \
        "output dtype is torch.float32, expected torch.float16 (its values do not match the reference either)"
    assert check(data, right[:, :128])[1] == "output shape is [128, 128, 1], expected [128, 256, 1]"
    assert check(data, [right])[1] == "custom_kernel returned list, expected a torch.Tensor"
    wrong = right.clone()
    wrong[3, 7, 0] += 100
    good, message = check(data, wrong)
    assert not good and "Number of mismatched elements: 1" in message and "ERROR AT (3, 7, 0)" in message


def test_check_treats_nan_and_inf_like_the_competition():
    data = reference.generate_input(128, 256, 256, 1, seed=2)
    right = reference.ref_kernel(tuple(x.clone() for x in data)).clone()
    bad = right.clone()
    bad[0, 0, 0] = float("nan")
    assert not check(data, bad)[0]
    bad[0, 0, 0] = float("-inf")
    assert not check(data, bad)[0]
