"""e2m1 / e4m3 decoding, packing and the quantizer, checked against values derived from the bit layouts."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from arena.nvfp4 import formats


def e2m1_from_bits(code: int) -> float:
    """Independent decoder: sign bit 3, exponent bits 2..1 (bias 1), mantissa bit 0; exponent 0 = subnormal."""
    sign = -1.0 if code & 8 else 1.0
    exponent, mantissa = (code >> 1) & 3, code & 1
    if exponent == 0:
        return sign * mantissa * 0.5
    return sign * (1 + mantissa / 2) * 2.0 ** (exponent - 1)


def e4m3_from_bits(byte: int) -> float:
    sign = -1.0 if byte & 0x80 else 1.0
    exponent, mantissa = (byte >> 3) & 0xF, byte & 7
    if exponent == 15 and mantissa == 7:
        return float("nan")
    if exponent == 0:
        return sign * mantissa / 8 * 2.0 ** -6
    return sign * (1 + mantissa / 8) * 2.0 ** (exponent - 7)


def test_all_16_codes_decode_to_their_bit_values():
    codes = torch.arange(16, dtype=torch.uint8)
    packed = formats.pack_codes(codes)
    decoded = formats.decode_fp4(packed)
    assert decoded.tolist() == [e2m1_from_bits(c) for c in range(16)]


def test_element_zero_is_the_low_nibble():
    raw = torch.tensor([0x72], dtype=torch.uint8)       # low nibble 2 (1.0), high nibble 7 (6.0)
    assert formats.decode_fp4(raw.view(torch.float4_e2m1fn_x2)).tolist() == [1.0, 6.0]


def test_all_256_e4m3_bytes_decode_exactly():
    raw = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    got = formats.decode_e4m3(raw, torch.float64).numpy()
    want = np.array([e4m3_from_bits(b) for b in range(256)])
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(got[~np.isnan(got)], want[~np.isnan(want)])


def test_every_product_of_code_and_scale_is_exact_in_fp16_and_bf16():
    values = torch.tensor([e2m1_from_bits(c) for c in range(16)], dtype=torch.float64)
    scales = formats.decode_e4m3(torch.arange(0, 0x7F, dtype=torch.uint8), torch.float64)  # finite, positive
    products = (values[:, None] * scales[None, :]).flatten()
    assert torch.equal(products.to(torch.float16).double(), products)
    assert torch.equal(products.to(torch.bfloat16).double(), products)


@given(st.lists(st.integers(0, 15), min_size=2, max_size=64).filter(lambda v: len(v) % 2 == 0))
def test_pack_unpack_round_trip(codes):
    codes = torch.tensor(codes, dtype=torch.uint8)
    assert torch.equal(formats.unpack_codes(formats.pack_codes(codes)), codes)


def test_dequantize_applies_one_scale_per_16_elements():
    codes = torch.full((1, 32), 2, dtype=torch.uint8)                 # all 1.0
    scales = torch.tensor([[2.0, 0.5]]).to(torch.float8_e4m3fn)
    out = formats.dequantize(formats.pack_codes(codes), scales)
    assert out[0, :16].tolist() == [2.0] * 16 and out[0, 16:].tolist() == [0.5] * 16


def test_dequantize_rejects_mismatched_scale_count():
    with pytest.raises(ValueError, match="scales have 1 columns; K=32 needs 2"):
        formats.dequantize(formats.pack_codes(torch.zeros(1, 32, dtype=torch.uint8)),
                           torch.ones(1, 1).to(torch.float8_e4m3fn))


def test_encode_rounds_to_nearest_with_ties_to_even_and_saturates():
    x = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 7.0, 100.0, -0.3, -2.9])
    assert formats.encode_e2m1(x).tolist() == [0, 2, 2, 4, 4, 6, 6, 7, 7, 9, 13]


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_quantizer_error_is_bounded_by_half_a_step(seed):
    torch.manual_seed(seed)
    x = torch.randn(4, 64) * 3
    packed, scales = formats.quantize_nvfp4(x)
    y = formats.dequantize(packed, scales)
    block_amax = x.abs().unflatten(-1, (-1, 16)).amax(-1, keepdim=True)
    # e2m1 spacing is at most 2 (between 4 and 6) in units of the scale = amax/6, plus e4m3 rounding of the scale.
    bound = (block_amax / 6 * 1.0625 + 1e-6) * 1.0 + block_amax * 0.07
    assert ((y - x).abs().unflatten(-1, (-1, 16)) <= bound).all()
    assert scales.dtype == torch.float8_e4m3fn and packed.dtype == torch.float4_e2m1fn_x2
