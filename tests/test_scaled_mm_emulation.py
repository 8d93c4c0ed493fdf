"""NVFP4 torch._scaled_mm emulated off Blackwell: bit-identical to the reference, works under torch.compile,
other calls untouched, bad arguments refused like torch refuses them (CPU)."""
import pytest
import torch

import reference
from arena.nvfp4 import scaled_mm_emulation as sme
from arena.nvfp4.emulation import scaled_gemm
from arena.nvfp4.layouts import to_blocked


@pytest.fixture
def emulated():
    assert sme.install(None) == sme.ANNOUNCEMENT
    yield
    sme.uninstall()


def official_call(a, b, sfa, sfb, out_dtype=torch.float16, **kwargs):
    """One batch, the way the competition's reference and its gemv example call it."""
    return torch._scaled_mm(a, b.transpose(0, 1), reference.to_blocked(sfa), reference.to_blocked(sfb),
                            bias=None, out_dtype=out_dtype, **kwargs)


def loop_over_l(data):
    a, b, sfa, sfb, _, _, c = data
    for l in range(c.shape[2]):
        c[:, :, l] = official_call(a[:, :, l], b[:, :, l], sfa[:, :, l], sfb[:, :, l])
    return c


def same_bits(x, y):
    bits = {2: torch.int16, 4: torch.int32}[x.element_size()]
    return x.dtype == y.dtype and x.shape == y.shape and torch.equal(x.view(bits), y.view(bits))


def test_installs_only_without_fp4_tensor_cores():
    original = torch._scaled_mm
    try:
        assert sme.install((10, 0)) is None and sme.install((12, 0)) is None
        assert torch._scaled_mm is original
        assert sme.install((9, 0)) == "emulated torch._scaled_mm: times are not comparable"
        assert torch._scaled_mm is not original
        assert sme.install(None) == sme.ANNOUNCEMENT        # a second install does not wrap twice
        sme.uninstall()
        assert torch._scaled_mm is original
    finally:
        sme.uninstall()


@pytest.mark.parametrize("m,n,k,l", [(128, 128, 256, 1), (256, 384, 512, 2), (384, 256, 1536, 3)])
@pytest.mark.parametrize("data", ["official", "allcodes", "quantized"])
def test_loop_over_l_is_bit_identical_to_the_reference(emulated, m, n, k, l, data):
    inputs = reference.generate_input(m, n, k, l, seed=m + k + l, data=data)
    want = reference.ref_kernel(tuple(x.clone() for x in inputs))
    assert same_bits(loop_over_l(tuple(x.clone() for x in inputs)), want)


@pytest.mark.parametrize("out_dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_every_output_dtype_rounds_the_exact_product_once(emulated, out_dtype):
    a, b, sfa, sfb, _, _, _ = reference.generate_input(256, 128, 512, 1, seed=7, data="quantized")
    got = official_call(a[:, :, 0], b[:, :, 0], sfa[:, :, 0], sfb[:, :, 0], out_dtype=out_dtype)
    want = scaled_gemm(a[:, :, 0], b[:, :, 0], sfa[:, :, 0], sfb[:, :, 0]).to(out_dtype)
    assert same_bits(got, want)


def test_irregular_rows_with_zero_padded_scales_as_group_gemm_does(emulated):
    m, n, k = 40, 256, 512                  # group gemm's M is irregular; its to_blocked pads with zeros
    a, b, sfa, sfb, _, _, _ = reference.generate_input(128, n, k, 1, seed=5)
    a, sfa = a[:m], sfa[:m]
    got = torch._scaled_mm(a[:, :, 0], b[:, :, 0].transpose(0, 1), to_blocked(sfa[:, :, 0], fill=0.0),
                           to_blocked(sfb[:, :, 0], fill=0.0), bias=None, out_dtype=torch.float16)
    assert same_bits(got, scaled_gemm(a[:, :, 0], b[:, :, 0], sfa[:, :, 0], sfb[:, :, 0]).to(torch.float16))


def test_positional_arguments_out_and_bias(emulated):
    a, b, sfa, sfb, _, _, _ = reference.generate_input(128, 128, 256, 1, seed=2)
    a, b, sfa, sfb = a[:, :, 0], b[:, :, 0], sfa[:, :, 0], sfb[:, :, 0]
    sa, sb = reference.to_blocked(sfa), reference.to_blocked(sfb)
    want = scaled_gemm(a, b, sfa, sfb)
    assert same_bits(torch._scaled_mm(a, b.T, sa, sb, None, None, torch.float16), want.to(torch.float16))
    out = torch.empty(1, dtype=torch.bfloat16)
    assert torch._scaled_mm(a, b.T, sa, sb, out_dtype=torch.bfloat16, out=out) is out
    assert same_bits(out, want.to(torch.bfloat16))
    bias = torch.randn(128, dtype=torch.float16)
    got = torch._scaled_mm(a, b.T, sa, sb, bias=bias, out_dtype=torch.float16)
    assert same_bits(got, (want.float() + bias.float()).to(torch.float16))   # fp32 epilogue, as cuBLAS


def test_works_inside_torch_compile(emulated):
    a, b, sfa, sfb, _, _, c = reference.generate_input(256, 128, 512, 1, seed=4)
    sa, sb = reference.to_blocked(sfa[:, :, 0]), reference.to_blocked(sfb[:, :, 0])

    @torch.compile(fullgraph=True)          # inductor, no graph break
    def call(a, bt, sa, sb):
        return torch._scaled_mm(a, bt, sa, sb, bias=None, out_dtype=torch.float16)

    want = scaled_gemm(a[:, :, 0], b[:, :, 0], sfa[:, :, 0], sfb[:, :, 0]).to(torch.float16)
    assert same_bits(call(a[:, :, 0], b[:, :, 0].transpose(0, 1), sa, sb), want)


def test_a_whole_compiled_kernel_looping_over_l_matches_the_reference(emulated):
    inputs = reference.generate_input(256, 384, 512, 2, seed=9)
    want = reference.ref_kernel(tuple(x.clone() for x in inputs))
    kernel = torch.compile(loop_over_l, fullgraph=True, backend="aot_eager")   # dynamo + fake impl, quickly
    assert same_bits(kernel(tuple(x.clone() for x in inputs)), want)


def test_other_calls_go_to_torch_unchanged(emulated):
    x = torch.randn(32, 64).to(torch.float8_e4m3fn)
    y = torch.randn(32, 64).to(torch.float8_e4m3fn)
    one = torch.tensor(1.0)
    got = torch._scaled_mm(x, y.T, one, one, out_dtype=torch.float32)       # fp8 tensorwise: torch's own
    assert torch.equal(got, sme._original(x, y.T, one, one, out_dtype=torch.float32))
    # MXFP4 (fp4 with e8m0 scales) is not emulated: torch answers, with its own error here.
    a, b, sfa, _, _, _, _ = reference.generate_input(128, 128, 256, 1, seed=1)
    e8m0 = reference.to_blocked(sfa[:, :, 0]).float().to(torch.float8_e8m0fnu)
    with pytest.raises(Exception) as ours:
        torch._scaled_mm(a[:, :, 0], b[:, :, 0].T, e8m0, e8m0, out_dtype=torch.float16)
    with pytest.raises(Exception) as theirs:
        sme._original(a[:, :, 0], b[:, :, 0].T, e8m0, e8m0, out_dtype=torch.float16)
    assert str(ours.value) == str(theirs.value)


def _bad_calls():
    a, b, sfa, sfb, sfa_perm, _, _ = reference.generate_input(128, 384, 512, 1, seed=3)
    a, b, sfa, sfb = a[:, :, 0], b[:, :, 0], sfa[:, :, 0], sfb[:, :, 0]
    sa, sb = reference.to_blocked(sfa), reference.to_blocked(sfb)
    f16 = {"out_dtype": torch.float16}
    return {
        "scale_a one tile short": ((a, b.T, sa[:-512], sb), f16, "scale_a should have 4096 elements"),
        "scales swapped": ((a, b.T, sb, sa), f16, "scale_b should have 12288 elements"),
        "half the scale columns": ((a, b.T, sfa.contiguous()[:, :16], sb), f16, "should have 4096"),
        "permuted scales, not contiguous": ((a, b.T, sfa_perm[..., 0], sb), f16, "both should be contiguous"),
        "fp32 scales with fp4": ((a, b.T, sa.float(), sb), f16, "float8_e4m3fn scales"),
        "b not transposed": ((a, b, sa, sb), f16, "cannot be multiplied"),
        "b transposed by a copy": ((a, b.view(torch.uint8).T.contiguous().view(b.dtype), sa, sb), f16, "mat2 must be col_major"),
        "no out_dtype": ((a, b.T, sa, sb), {}, "float16, bfloat16 or float32"),
        "fast accumulation": ((a, b.T, sa, sb), {**f16, "use_fast_accum": True}, "use_fast_accum"),
        "bias with fp32 output": ((a, b.T, sa, sb), {"out_dtype": torch.float32,
                                                     "bias": torch.zeros(384, dtype=torch.float32)}, "Bias"),
        "bias of the wrong size": ((a, b.T, sa, sb), {**f16, "bias": torch.zeros(128, dtype=torch.float16)},
                                   "Bias must be size 384"),
    }


@pytest.mark.parametrize("case", list(_bad_calls()))
def test_bad_arguments_are_refused_with_torchs_reason(emulated, case):
    args, kwargs, reason = _bad_calls()[case]
    with pytest.raises(RuntimeError, match=reason):
        torch._scaled_mm(*args, **kwargs)


def test_bad_scales_are_refused_under_torch_compile_too(emulated):
    args, kwargs, reason = _bad_calls()["scale_a one tile short"]
    with pytest.raises(Exception, match=reason):
        torch.compile(lambda *x: torch._scaled_mm(*x, **kwargs), backend="aot_eager")(*args)
