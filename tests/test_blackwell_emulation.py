"""--emulate-blackwell on the CPU: the PTX rewriter and the build shims, with real nvcc and ptxas.

- Every tcgen05 form of tests/blackwell/every_tcgen05.cu (our own kernel) is rewritten; ptxas for sm_90a
  accepts the result and rejects the original; no tcgen05 is left.
- Forms the emulation does not cover, and sm_100-only instructions that are not tcgen05, fail in one line
  naming the instruction.
- The nvcc shim builds an object whose only GPU code is an sm_90a ELF, and records the call sites.
- The ld/st offset table the rewriter relies on is the same for every thread of the warp.
The GPU half (the shipped sm_100a kernel and the public submissions through eval.py) is `bash bench/run_gpu.sh emulation`.
"""
import json
import os
import re
import subprocess
import sys

import pytest

from arena.blackwell import ptx_rewrite, runtime, toolchain
from arena.blackwell.ptx_rewrite import CannotEmulate, rewrite
from arena.compile import find_tool
from tests.fileload import load_file

pytestmark = pytest.mark.slow     # nvcc builds and real evaluations: `pytest -m slow`

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EVERY = os.path.join(ROOT, "tests", "blackwell", "every_tcgen05.cu")
NVCC = find_tool("nvcc")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc not found")


def _ptx(source: str, tmp_path, name="k", *flags: str) -> str:
    out = tmp_path / f"{name}.ptx"
    subprocess.run([NVCC, "-gencode=arch=compute_100a,code=compute_100a", "-ptx", "-O3", *flags, source, "-o", str(out)],
                   check=True, capture_output=True, text=True, timeout=240)
    return out.read_text()


def _ptxas(ptx: str, tmp_path, arch="sm_90a") -> subprocess.CompletedProcess:
    path = tmp_path / f"in_{arch}.ptx"
    path.write_text(ptx)
    return subprocess.run([toolchain.real_tool("ptxas"), f"-arch={arch}", str(path), "-o", str(tmp_path / "o.cubin")],
                          capture_output=True, text=True, timeout=240)


@needs_nvcc
def test_every_tcgen05_form_is_rewritten_and_assembles_for_sm90a(emulation_env, tmp_path):
    original = _ptx(EVERY, tmp_path)
    retargeted_only = re.sub(r"\.target\s+sm_100a", ".target sm_90a", original)
    before = _ptxas(retargeted_only, tmp_path)      # without the rewrite, sm_90a has no tcgen05
    assert before.returncode != 0 and "tcgen05" in before.stderr, before.stderr
    new, sites = rewrite(original, toolchain.library_ptx())
    assert not re.search(r"\btcgen05\.", ptx_rewrite.strip_comments(new))
    assert re.search(r"^\s*\.target\s+sm_90a", new, re.M)
    done = _ptxas(new, tmp_path)
    assert done.returncode == 0, done.stderr
    seen = " ".join(s.instruction for s in sites)
    for form in ["tcgen05.alloc", "tcgen05.dealloc", "tcgen05.relinquish_alloc_permit",
                 "tcgen05.fence::before_thread_sync", "tcgen05.fence::after_thread_sync",
                 "tcgen05.wait::ld", "tcgen05.wait::st", "tcgen05.st.sync.aligned.32x32b",
                 "tcgen05.st.sync.aligned.16x256b", ".multicast::cluster", "arrive::one.b64"]:
        assert form in seen, form
    for kind in ptx_rewrite.MMA_KINDS:
        assert f"kind::{kind} " in seen or f"kind::{kind}." in seen, kind
    for shape in ptx_rewrite.CP_SHAPES:
        assert f"tcgen05.cp.cta_group::1.{shape} " in seen, shape
    for shape in ptx_rewrite.LD_SHAPES:
        assert f"tcgen05.ld.sync.aligned.{shape}." in seen, shape
    assert "[%r" in seen and "mma.cta_group::1.kind::f16 [%r2], [%r" in seen      # A from tensor memory


@needs_nvcc
def test_the_nvcc_shim_builds_only_sm90a_code_and_records_the_call_sites(emulation_env, tmp_path):
    obj = tmp_path / "every.o"
    done = subprocess.run([emulation_env["PYTORCH_NVCC"], "-gencode=arch=compute_90,code=sm_90", "-arch=sm_100a",
                           "--ptxas-options=--gpu-name=sm_100a",      # as public submissions pass it
                           "-O3", "-c", EVERY, "-o", str(obj)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    sites = json.loads((tmp_path / "every.o.emu.json").read_text())
    assert len(sites) == 31 and sites[0]["instruction"].startswith("tcgen05.alloc")
    cuobjdump = find_tool("cuobjdump")
    if cuobjdump is None:
        pytest.skip("cuobjdump not found (pip install nvidia-cuda-cuobjdump)")
    listing = subprocess.run([cuobjdump, "-lelf", "-lptx", str(obj)], capture_output=True, text=True).stdout
    assert re.findall(r"sm_\w+", listing) == ["sm_90a"], listing
    sass = subprocess.run([cuobjdump, "-sass", str(obj)], capture_output=True, text=True).stdout
    assert "UTC" not in sass and "CALL" in sass


def test_a_source_that_calls_cublaslt_gets_the_fp4_matmul_wrappers(tmp_path, monkeypatch):
    """cuBLASLt refuses its block-scaled FP4 matmul on a Hopper GPU ("cuBLAS error: 15"): the nvcc shim force-includes
    emulation_cublaslt.h, whose wrappers run it, into a CUDA source that calls cuBLASLt, and into no other."""
    from arena.blackwell import shims
    commands = []
    monkeypatch.setattr(shims.subprocess, "call", lambda command, env: commands.append(command) or 0)
    monkeypatch.setattr(toolchain, "workdir", lambda: str(tmp_path))
    calls = tmp_path / "lt.cu"
    calls.write_text("#include <cublasLt.h>\nvoid f(cublasLtHandle_t h) { cublasLtMatmul(h, 0, 0, 0, 0, 0, 0, 0, 0, "
                     "0, 0, 0, 0, 0, 0, 0); }\n")
    plain = tmp_path / "k.cu"
    plain.write_text("__global__ void k() {}\n")
    for source in (calls, plain):
        assert shims.nvcc(["-O3", "-c", str(source), "-o", str(source) + ".o"]) == 0
    assert toolchain.CUBLASLT_HEADER in commands[0] and toolchain.host_header() in commands[0]
    assert toolchain.CUBLASLT_HEADER not in commands[1] and toolchain.host_header() in commands[1]


def _cublaslt_include() -> str | None:
    """A folder holding cublasLt.h: the CUDA toolkit's, or the nvidia-cublas wheel's (None: neither is here)."""
    folders = [os.path.join(toolchain.cuda_home(), "include")]
    try:
        import nvidia
        folders += [os.path.join(p, sub, "include") for p in nvidia.__path__ for sub in ("cu13", "cublas")]
    except ImportError:
        pass
    return next((f for f in folders if os.path.isfile(os.path.join(f, "cublasLt.h"))), None)


@needs_nvcc
def test_the_cublaslt_wrappers_compile_for_the_lookalike_and_replace_its_calls(tmp_path):
    """tests/submissions/cublaslt_nvfp4.py's CUDA source (its torch parts stubbed) with both headers: every cuBLASLt
    call the FP4 matmul needs reaches a wrapper."""
    include = _cublaslt_include()
    if include is None:
        pytest.skip("cublasLt.h not found (the CUDA toolkit's cuBLAS, or pip install nvidia-cublas)")
    text = open(os.path.join(ROOT, "tests", "submissions", "cublaslt_nvfp4.py")).read()
    source = text.split('CUDA_SOURCE = r"""')[1].split('"""')[0].replace("#include <torch/extension.h>", "")
    stub = ("#include <cstdint>\n#include <string>\nnamespace torch { struct Tensor { int64_t size(int) const; "
            "int64_t stride(int) const; int64_t numel() const; void* data_ptr() const; }; }\n")
    (tmp_path / "lt.cu").write_text(stub + source)
    done = subprocess.run([NVCC, "-gencode=arch=compute_100a,code=compute_100a", "-include", toolchain.host_header(),
                           "-include", toolchain.CUBLASLT_HEADER, f"-I{include}", "-c", str(tmp_path / "lt.cu"), "-o",
                           str(tmp_path / "lt.o")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    symbols = subprocess.run(["nm", str(tmp_path / "lt.o")], capture_output=True, text=True).stdout
    for wrapper in ("__nvfp4emu_lt_matmul", "__nvfp4emu_lt_heuristic", "__nvfp4emu_lt_desc_set"):
        assert wrapper in symbols, wrapper
    assert re.search(r" U cublasLtMatmul\b", symbols)          # the wrappers still reach cuBLASLt for the rest
    # the FP4 matmuls run are counted, once per module (weak), for the B200 time model
    assert re.search(r" [VW] __nvfp4emu_lt_fp4_calls\b", symbols) and \
        re.search(r" W __nvfp4emu_take_lt_fp4_calls\b", symbols), symbols


FP4_DOT_HARNESS = r"""
#include "emulation_fp4_dot.h"
extern "C" void dot_all(const uint8_t* a, int64_t lda, int a_rows, int a_trans, const uint8_t* b, int64_t ldb,
                        int b_rows, int b_trans, const uint8_t* sa, const uint8_t* sb, int64_t m_count,
                        int64_t n_count, int64_t k_count, float* out) {
  const __nvfp4emu_lt_matrix ma = {a, lda, a_rows, a_trans}, mb = {b, ldb, b_rows, b_trans};
  for (int64_t m = 0; m < m_count; ++m)
    for (int64_t n = 0; n < n_count; ++n) out[m * n_count + n] = __nvfp4emu_lt_dot(ma, mb, sa, sb, m, n, k_count);
}
"""


def test_the_cublaslt_fp4_arithmetic_matches_torch_in_each_layout(tmp_path):
    """emulation_fp4_dot.h (what the cuBLASLt wrappers compute) built for the host, against torch in float64 on
    random codes and UE4M3 scales in the 128x4-tiled layout: A and B row-major with op(B) = B^T (as a public
    submission orders them), the column-major "TN" form with the operands swapped (our look-alike's), and A
    column-major (M contiguous)."""
    import ctypes

    import torch

    from arena.nvfp4.layouts import to_blocked
    gxx = find_tool("g++") or find_tool("c++")
    if gxx is None:
        pytest.skip("no C++ compiler")
    (tmp_path / "dot.cpp").write_text(FP4_DOT_HARNESS)
    library = tmp_path / "dot.so"
    subprocess.run([gxx, "-O2", "-shared", "-fPIC", f"-I{os.path.dirname(toolchain.FP4_DOT_HEADER)}",
                    str(tmp_path / "dot.cpp"), "-o", str(library)], check=True, timeout=120)
    dot = ctypes.CDLL(str(library)).dot_all
    torch.manual_seed(0)
    m, n, k = 256, 128, 128
    e2m1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=torch.float64)
    ca, cb = torch.randint(0, 16, (m, k)), torch.randint(0, 16, (n, k))
    value = lambda codes: torch.where(codes >= 8, -1.0, 1.0).double() * e2m1[codes & 7]  # noqa: E731
    sfa = torch.randint(0x18, 0x48, (m, k // 16), dtype=torch.uint8).view(torch.float8_e4m3fn)
    sfb = torch.randint(0x18, 0x48, (n, k // 16), dtype=torch.uint8).view(torch.float8_e4m3fn)
    expected = (value(ca) * sfa.double().repeat_interleave(16, 1)) @ (value(cb) * sfb.double().repeat_interleave(16, 1)).T
    pack = lambda codes: (codes[:, 0::2] | (codes[:, 1::2] << 4)).to(torch.uint8).contiguous()  # noqa: E731
    blocked = lambda s: to_blocked(s).view(torch.uint8).contiguous()  # noqa: E731
    ptr = lambda t: ctypes.c_void_p(t.data_ptr())  # noqa: E731
    i64 = ctypes.c_int64

    def run(a, lda, a_rows, a_trans, b, ldb, b_rows, b_trans, sa, sb, rows, cols):
        out = torch.empty(rows, cols, dtype=torch.float32)
        dot(ptr(a), i64(lda), a_rows, a_trans, ptr(b), i64(ldb), b_rows, b_trans, ptr(sa), ptr(sb), i64(rows),
            i64(cols), i64(k), ptr(out))
        return out.double()

    forms = {
        "row-major, op(B) = B^T": (run(pack(ca), k, 1, 0, pack(cb), k, 1, 1, blocked(sfa), blocked(sfb), m, n), expected),
        "column-major TN, swapped": (run(pack(cb), k, 0, 1, pack(ca), k, 0, 0, blocked(sfb), blocked(sfa), n, m),
                                     expected.T),
        "A column-major": (run(pack(ca.T.contiguous()), m, 0, 0, pack(cb), k, 1, 1, blocked(sfa), blocked(sfb), m, n),
                           expected),
    }
    for form, (got, want) in forms.items():
        assert torch.allclose(got, want, rtol=1e-5, atol=1e-5 * want.abs().max().item()), form


@pytest.mark.gpu
def test_the_cublaslt_lookalike_passes_under_emulation(hopper_gpu, tmp_path):
    """tests/submissions/cublaslt_nvfp4.py calls cuBLASLt's block-scaled FP4 matmul, which a Hopper GPU's cuBLASLt
    refuses: under --emulate-blackwell the wrappers of emulation_cublaslt.h run it, and every test case passes."""
    done = subprocess.run([sys.executable, os.path.join(ROOT, "eval.py"), "test", "--emulate-blackwell",
                           "--submission", os.path.join(ROOT, "tests", "submissions", "cublaslt_nvfp4.py")],
                          capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert re.search(r"(\d+) of \1 cases passed", done.stdout), done.stdout[-3000:]
    # predict: a call of cuBLASLt's NVFP4 matmul is predicted from cuBLASLt's public B200 time, never timed here
    report = os.path.join(str(tmp_path), "p.json")
    done = subprocess.run([sys.executable, os.path.join(ROOT, "eval.py"), "predict", "-q", "--only", "1",
                           "--submission", os.path.join(ROOT, "tests", "submissions", "cublaslt_nvfp4.py"),
                           "--json", report], capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    prediction = json.load(open(report))["cases"][0]["prediction"]
    assert prediction["bound"] == "cuBLASLt" and prediction["hopper_us"] is None, prediction
    assert prediction["counts"]["cublaslt_fp4_calls"] == 1 and "cuBLASLt's NVFP4 matmul" in prediction["rests_on"]


MODULE = """.version 8.7
.target sm_100a
.address_size 64
.visible .entry k(.param .u32 p)
{
.reg .b32 %r<4>;
.reg .b64 %rd<4>;
.reg .pred %p<2>;
ld.param.u32 %r1, [p];
BODY
ret;
}
"""


@pytest.mark.parametrize("body, named", [
    ("tcgen05.shift.cta_group::2.down [%r1];", "tcgen05.shift"),
    ("tcgen05.mma.cta_group::2.kind::mxf8f6f4.block_scale [%r1], %rd1, %rd2, %r2, [%r1], [%r1], "
     "{%r1, %r1, %r1, %r1, %r1, %r1, %r1, %r1}, %p1;", "disable-output-lane"),
    ("tcgen05.mma.cta_group::2.kind::f16 [%r1], %rd1, %rd2, %r2, {%r1, %r1, %r1, %r1}, %p1;", "disable-output-lane"),
    ("tcgen05.mma.ws.cta_group::1.kind::f16 [%r1], %rd1, %rd2, %r2, %p1;", "tcgen05.mma.ws"),
    ("tcgen05.shift.cta_group::1.down [%r1];", "tcgen05.shift"),
    ("tcgen05.ld.sync.aligned.16x32bx2.x1.b32 {%r2}, [%r1], 2;", "16x32bx2"),
    ("tcgen05.ld.sync.aligned.32x32b.x1.pack::16b.b32 {%r2}, [%r1];", "16-bit packing"),
    ("tcgen05.mma.cta_group::1.kind::f16 [%r1], %rd1, %rd2, %r2, {%r1, %r1, %r1, %r1}, %p1;", "disable-output-lane"),
    ("tcgen05.cp.cta_group::1.128x128b.b8x16.b4x16_p64 [%r1], %rd1;", "decompression"),
    ("tcgen05.ld.sync.aligned.32x32b.x2.b32 {%r2}, [%r1];", "1 registers where the shape holds 2"),
    ("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster.cta_group::2 "
     "[%r1], [%rd1], %r2, [%r1], %rs1;", "TMA with .cta_group::2"),
    ("cvt.rn.relu.f16x2.e2m1x2 %r2, %r1;", "FP4 conversion is not emulated"),
    ("cvt.rp.relu.ue8m0x2.bf16x2 %r2, %r1;", "UE8M0 conversion is not emulated"),
    ("cvt.rn.ue8m0x2.f32 %r2, %r1, %r1;", "UE8M0 conversion is not emulated"),
    ("clusterlaunchcontrol.try_cancel.async.shared::cta.b128 [%r1], [%r2];", "cluster launch control form"),
])
def test_what_is_not_emulated_fails_in_one_line_naming_the_instruction(body, named):
    with pytest.raises(CannotEmulate) as caught:
        rewrite(MODULE.replace("BODY", body), ".version 8.7\n.target sm_90a\n.address_size 64\n")
    message = str(caught.value)
    assert "\n" not in message and named in message
    assert body.split()[0].split(".")[0] in message       # the instruction's own text is quoted


PAIR = os.path.join(ROOT, "tests", "blackwell", "cta_pair_gemm.cu")
PAIR_FORMS = [   # (a .cta_group::2 instruction, the library function it becomes)
    ("tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 [%r1], 64;", "__nvfp4emu_alloc2"),
    ("tcgen05.dealloc.cta_group::2.sync.aligned.b32 %r1, 64;", "__nvfp4emu_dealloc2"),
    ("tcgen05.mma.cta_group::2.kind::f16 [%r1], %rd1, %rd2, %r2, %p1;", "__nvfp4emu_mma2"),
    ("tcgen05.mma.cta_group::2.kind::tf32 [%r1], [%r2], %rd2, %r2, {%r1, %r2, %r3, %r1, %r2, %r3, %r1, %r2}, %p1;",
     "__nvfp4emu_mma2"),
    ("tcgen05.mma.cta_group::2.kind::mxf4nvf4.block_scale.block16 [%r1], %rd1, %rd2, %r2, [%r3], [%r1], %p1;",
     "__nvfp4emu_mma2"),
    ("tcgen05.mma.cta_group::2.kind::mxf8f6f4.block_scale.scale_vec::1X [%r1], %rd1, %rd2, %r2, [%r3], [%r1], %p1;",
     "__nvfp4emu_mma2"),
    ("tcgen05.cp.cta_group::2.32x128b.warpx4 [%r1], %rd1;", "__nvfp4emu_cp2"),
    ("tcgen05.cp.cta_group::2.128x256b [%r1], %rd1;", "__nvfp4emu_cp2"),
    ("tcgen05.cp.cta_group::2.64x128b.warpx2::02_13 [%r1], %rd1;", "__nvfp4emu_cp2"),
    ("tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.b64 [%r1];", "__nvfp4emu_commit2"),
    ("tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [%r1], %r2;",
     "__nvfp4emu_commit2"),
    ("cp.async.bulk.tensor.2d.cta_group::2.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], "
     "[%rd1, {%r2, %r3}], [%r2];", "__nvfp4emu_pair_tma_begin"),
    ("@%p1 cp.async.bulk.tensor.3d.cta_group::2.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint "
     "[%r1], [%rd1, {%r2, %r3, %r2}], [%r2], %rd2;", "__nvfp4emu_pair_tma_begin"),
    ("cp.async.bulk.tensor.2d.cta_group::2.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster "
     "[%r1], [%rd1, {%r2, %r3}], [%r2], %rs1;", "__nvfp4emu_pair_tma_multicast_begin"),
    ("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster.cta_group::2 "
     "[%r1], [%rd1, {%r2, %r3}], [%r2], %rs1;", "__nvfp4emu_pair_tma_multicast_begin"),
]


@pytest.mark.parametrize("body, function", PAIR_FORMS)
def test_every_cta_pair_form_becomes_a_call_of_its_pair_function(body, function):
    new, sites = rewrite(MODULE.replace("BODY", body), ".version 8.7\n.target sm_90a\n.address_size 64\n")
    code = ptx_rewrite.strip_comments(new)
    assert "cta_group" not in code and "tcgen05." not in code
    assert re.search(rf"call (\(emu_ret\d+\), )?{function}, ", code), code
    if "{%r1, %r2, %r3" in body:     # the 8-register disable-output-lane mask: its OR goes to the library
        assert code.count("or.b32") == 8
    if body.startswith("cp.async") and "multicast::cluster" in body.split()[0]:
        # a unicast TMA into the issuing CTA on the scratch barrier, without the mask; end copies and completes
        scratch = re.search(r"call \(emu_ret\d+\), __nvfp4emu_pair_tma_multicast_begin, .*\n\s*ld\.param\.b32 "
                            r"(%emu_t\d+)", code).group(1)
        tma = re.search(rf"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global\.mbarrier::complete_tx::bytes "
                        rf"\[%r1\], \[%emu_t\d+, \{{[^}}]*\}}\], \[{scratch}\];", code)
        assert tma and "multicast" not in tma.group(0), code
        assert re.search(r"call __nvfp4emu_pair_tma_multicast_end, ", code[tma.end():]), code
    elif body.startswith("cp.async") or body.startswith("@%p1 cp.async"):
        # sm_90's TMA on the barrier begin returns (low word), then end forwards the bytes of the map's box
        began = re.search(r"call \(emu_ret\d+\), __nvfp4emu_pair_tma_begin, .*\n\s*ld\.param\.b64 (%emu_t\d+)",
                          code).group(1)
        mbar = re.search(rf"cvt\.u32\.u64 (%emu_t\d+), {began};", code).group(1)
        tma = re.search(rf"cp\.async\.bulk\.tensor\.\dd\.shared::cluster\.global\.mbarrier::complete_tx::bytes"
                        rf"[\w:.]* \[%r1\], \[(?:%rd1|%emu_t\d+), \{{[^}}]*\}}\], \[{mbar}\]", code)
        assert tma, code
        assert "__nvfp4emu_tma_box_bytes" in code[:tma.start()]
        assert re.search(r"call __nvfp4emu_pair_tma_end, ", code[tma.end():]), code
    if body.startswith("@%p1"):
        for function in ("__nvfp4emu_pair_tma_begin", "__nvfp4emu_pair_tma_end"):
            assert re.search(rf"@%p1 call (\(emu_ret\d+\), )?{function}, ", code), code


@pytest.mark.gpu
def test_cta_pair_lookalikes_match_torch_on_a_hopper_gpu(hopper_gpu):
    """bench/emulation/cta_pair_check.py on a Hopper GPU (tests/blackwell/cta_pair_gemm.cu), every row PASS. Three
    rows stand for public CuTe DSL files that passed on B200s and failed here:
    - one-CTA MMAs in 2x1 clusters (`cluster_gemm`): the odd CTA's shared::cta addresses carry its cluster rank,
      which a descriptor drops; the emulation read the even CTA's shared memory ("an illegal instruction");
    - a TMA .cta_group::2 on a map whose word 16 (the bytes of one box) is 0, as CuTe DSL's own encoder leaves it:
      the odd CTA's bytes were forwarded to the even CTA's barrier as 0, and a 2-SM dual GEMM hung;
    - a pair GEMM whose odd CTA issues the MMAs as well, never committing them: the odd CTA's tcgen05.ld failed
      with "never committed"; now the even CTA's MMAs alone count, with a warning."""
    done = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "emulation", "cta_pair_check.py")],
                          capture_output=True, text=True, timeout=900, cwd=ROOT)
    rows = [line for line in done.stdout.splitlines() if line.startswith(("PASS", "FAIL"))]
    assert any(row.startswith("PASS") and "in clusters of 2" in row for row in rows), done.stdout[-3000:]
    assert sum(row.startswith("PASS") and "word 16" in row for row in rows) == 2, done.stdout[-3000:]
    assert any(row.startswith("PASS") and "odd CTA issuing too" in row and "warned" in row for row in rows), \
        done.stdout[-3000:]
    assert done.returncode == 0 and len(rows) == 8, done.stdout[-3000:]


@pytest.mark.gpu
def test_cluster_launch_control_cancels_clusters_not_yet_started(hopper_gpu):
    """bench/emulation/clc_check.py on a Hopper GPU (tests/blackwell/clc.cu): 1024 CTAs, one per SM at a time, in
    clusters of 1 and 2. Each tile is done exactly once and only about one CTA per SM starts: a public CuTe DSL
    group GEMM sizes a workspace by the SM count and indexes it by cluster, and with cancels that never succeeded
    every cluster ran and one case ended in an illegal memory access (it passed on its B200)."""
    done = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "emulation", "clc_check.py")],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    rows = [line for line in done.stdout.splitlines() if line.startswith(("PASS", "FAIL"))]
    assert done.returncode == 0 and len(rows) == 2 and all(row.startswith("PASS") for row in rows), done.stdout[-3000:]


def test_relinquish_of_a_cta_pair_has_nothing_to_do():
    new, _ = rewrite(MODULE.replace("BODY", "tcgen05.relinquish_alloc_permit.cta_group::2.sync.aligned;"),
                     ".version 8.7\n.target sm_90a\n.address_size 64\n")
    assert "tcgen05" not in ptx_rewrite.strip_comments(new)


@needs_nvcc
def test_the_cta_pair_lookalike_is_rewritten_and_assembles_for_sm90a(emulation_env, tmp_path):
    out = tmp_path / "pair.ptx"
    subprocess.run([NVCC, "-gencode=arch=compute_100a,code=compute_100a", "-ptx", "-O3", "-DCTA_PAIR_KERNELS_ONLY",
                    PAIR, "-o", str(out)], check=True, capture_output=True, text=True, timeout=240)
    original = out.read_text()
    for form in ["tcgen05.alloc.cta_group::2.", "tcgen05.dealloc.cta_group::2.", "tcgen05.relinquish_alloc_permit.cta_group::2",
                 "tcgen05.mma.cta_group::2.kind::f16 ", "tcgen05.mma.cta_group::2.kind::mxf4nvf4.block_scale.block16 ",
                 "tcgen05.cp.cta_group::2.32x128b.warpx4 ", "tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::"
                 "cluster.multicast::cluster.b64", "cp.async.bulk.tensor.2d.cta_group::2.",
                 "complete_tx::bytes.multicast::cluster"]:
        assert form in original, form
    before = _ptxas(re.sub(r"\.target\s+sm_100a", ".target sm_90a", original), tmp_path)
    assert before.returncode != 0
    new, sites = rewrite(original, toolchain.library_ptx())
    code = ptx_rewrite.strip_comments(new)
    assert not re.search(r"\btcgen05\.", code) and ".cta_group::" not in code
    for function in ("alloc2", "dealloc2", "mma2", "cp2", "commit2", "pair_tma_begin", "pair_tma_end",
                     "pair_tma_multicast_begin", "pair_tma_multicast_end"):
        assert re.search(rf"call (\(emu_ret\d+\), )?__nvfp4emu_{function}, ", code), function
    done = _ptxas(new, tmp_path)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("record, words", [
    ([80, 1, 1, 0, 0, 0, 0, 0], "has no peer"),
    ([81, 1, 1, 0, 0, 0, 0, 0], "within 10 s"),
    ([82, 1, 0, 2, 0, 0, 0, 0], "holds no tensor memory from tcgen05.alloc.cta_group::2"),
    ([83, 1, 0x08000000 | 1 << 27, 6, 0, 0, 0, 0], "M = 128 with cta_group::2"),
    ([84, 1, 0x10000000 | 3 << 17, 0, 0, 0, 0, 0], "N = 24 with cta_group::2"),
    ([85, 1, 4, 0, 0, 0, 0, 0], "disable-output-lane mask"),
    ([86, 1, 0, 128 | 1 << 16, 0, 0, 0, 0], "pair's odd CTA"),
])
def test_each_cta_pair_error_reads_as_one_line(record, words):
    text = runtime.describe(record + [0] * 8, {1: "tcgen05.mma.cta_group::2.kind::f16 [%r1], %rd1, %rd2, %r2, %p1;"})
    assert "\n" not in text and words in text and "tcgen05.mma.cta_group::2" in text, text


def test_a_module_for_another_target_is_refused():
    with pytest.raises(CannotEmulate, match="targets sm_90a, not sm_100a"):
        rewrite(MODULE.replace("sm_100a", "sm_90a").replace("BODY", ""), "")


@needs_nvcc
def test_an_sm100_only_instruction_outside_tcgen05_is_named(emulation_env, tmp_path):
    source = tmp_path / "fp4cvt.cu"
    source.write_text("""
#include <stdint.h>
__global__ void k(float* x, uint32_t* y) {
  uint32_t r32;
  uint16_t r16;
  asm volatile("cvt.rn.satfinite.e2m3x2.f32 %0, %1, %2;" : "=h"(r16) : "f"(x[0]), "f"(x[1]));
  r32 = r16;
  y[threadIdx.x] = r32;
}
""")
    done = subprocess.run([emulation_env["PYTORCH_NVCC"], "-c", str(source), "-o", str(tmp_path / "k.o")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    lines = [x for x in done.stderr.splitlines() if x.startswith("emulate-blackwell:")]
    assert len(lines) == 1, done.stderr
    assert "cannot emulate `cvt.rn.satfinite.e2m3x2.f32" in lines[0] and "ptxas for sm_90a says" in lines[0]


FP4_AND_TMA = r"""
#include <cuda_fp4.h>
#include <cuda_fp16.h>
#include <stdint.h>
__global__ void k(const float* x, unsigned short* to_fp4, unsigned int* from_fp4, const __grid_constant__ uint64_t tmap) {
  int i = threadIdx.x;
  to_fp4[i] = __nv_cvt_float2_to_fp4x2(make_float2(x[2 * i], x[2 * i + 1]), __NV_E2M1, cudaRoundNearest);
  __half2_raw h = __nv_cvt_fp4x2_to_halfraw2((__nv_fp4x2_storage_t)i, __NV_E2M1);
  from_fp4[i] = h.x | (h.y << 16);
  __shared__ __align__(128) uint8_t tile[4096];
  __shared__ __align__(8) uint64_t bar;
  uint32_t dst = (uint32_t)__cvta_generic_to_shared(tile), mbar = (uint32_t)__cvta_generic_to_shared(&bar);
  if (i == 0)   // sm_100's TMA spelling, as public submissions write it
    asm volatile("cp.async.bulk.tensor.2d.shared::cta.global.mbarrier::complete_tx::bytes.cta_group::1 [%0], [%1, {%2, %2}], [%3];"
                 :: "r"(dst), "l"(&tmap), "r"(0), "r"(mbar) : "memory");
}
"""


@needs_nvcc
def test_fp4_conversions_and_sm100_tma_spelling_are_rewritten_and_assemble(emulation_env, tmp_path):
    source = tmp_path / "fp4_tma.cu"
    source.write_text(FP4_AND_TMA)
    original = _ptx(str(source), tmp_path)
    assert "cvt.rn.satfinite.e2m1x2.f32" in original and "cvt.rn.f16x2.e2m1x2" in original
    assert ".cta_group::1 [" in original
    before = _ptxas(re.sub(r"\.target\s+sm_100a", ".target sm_90a", original), tmp_path)
    assert before.returncode != 0 and ("e2m1x2" in before.stderr or "cta_group" in before.stderr), before.stderr
    new, _ = rewrite(original, toolchain.library_ptx())
    code = ptx_rewrite.strip_comments(new)
    assert not re.search(r"\bcvt\.[\w.]*e2m1x2", code) and "cta_group" not in code
    assert re.search(r"call \(emu_ret\d+\), __nvfp4emu_cvt_e2m1x2_f32", code)
    assert not re.search(r"call \(emu_ret\d+\), __nvfp4emu_cvt_f16x2_e2m1x2", code)          # inline instead
    assert re.search(r"prmt\.b32 %emu_t\d+", code)
    # a packed-FP4 map counts the innermost coordinate in 4-bit elements, and a map of a type Hopper's TMA lacks is
    # replaced by its UINT8 copy: both go through the library first
    block = re.search(r"\{[^{}]*__nvfp4emu_tma_coord[^{}]*__nvfp4emu_tma_map[^{}]*"
                      r"cp\.async\.bulk\.tensor\.2d\.shared::cta\.global\.mbarrier::complete_tx::bytes "
                      r"\[%r\d+\], \[%emu_t\d+, \{%emu_t\d+, ", code)
    assert block, code[-3000:]
    done = _ptxas(new, tmp_path)
    assert done.returncode == 0, done.stderr


UE8M0 = r"""
#include <cuda_fp8.h>
#include <stdint.h>
__global__ void k(const float* x, const uint32_t* p, uint16_t* to_ue8m0, uint32_t* to_bf16) {
  int i = threadIdx.x;
  uint16_t r;
  asm volatile("cvt.rp.satfinite.ue8m0x2.f32 %0, %1, %2;" : "=h"(r) : "f"(x[2 * i]), "f"(x[2 * i + 1]));
  to_ue8m0[8 * i] = r;     // the form CUTLASS's SM100 epilogues emit for their output scale factors
  asm volatile("cvt.rz.satfinite.ue8m0x2.f32 %0, %1, %2;" : "=h"(r) : "f"(x[2 * i]), "f"(x[2 * i + 1]));
  to_ue8m0[8 * i + 1] = r;
  asm volatile("cvt.rp.ue8m0x2.f32 %0, %1, %2;" : "=h"(r) : "f"(x[2 * i]), "f"(0.0f));
  to_ue8m0[8 * i + 2] = r;
  asm volatile("cvt.rz.ue8m0x2.f32 %0, %1, %2;" : "=h"(r) : "f"(1.5f), "f"(x[2 * i + 1]));
  to_ue8m0[8 * i + 3] = r;
  asm volatile("cvt.rp.satfinite.ue8m0x2.bf16x2 %0, %1;" : "=h"(r) : "r"(p[i]));
  to_ue8m0[8 * i + 4] = r;
  asm volatile("cvt.rz.ue8m0x2.bf16x2 %0, %1;" : "=h"(r) : "r"(p[i]));
  to_ue8m0[8 * i + 5] = r;
  to_ue8m0[8 * i + 6] = __nv_cvt_float2_to_e8m0x2(make_float2(x[2 * i], x[2 * i + 1]), __NV_SATFINITE, cudaRoundPosInf);
  uint32_t w;
  asm volatile("cvt.rn.bf16x2.ue8m0x2 %0, %1;" : "=r"(w) : "h"((uint16_t)p[i]));   // CUTLASS's other one
  to_bf16[i] = w;
}
"""


@needs_nvcc
def test_ue8m0_conversions_are_rewritten_and_assemble(emulation_env, tmp_path):
    source = tmp_path / "ue8m0.cu"
    source.write_text(UE8M0)
    original = _ptx(str(source), tmp_path)
    forms = re.findall(r"\bcvt\.([\w.]*ue8m0x2[\w.]*)", original)
    assert sorted(set(forms)) == ["rn.bf16x2.ue8m0x2", "rp.satfinite.ue8m0x2.bf16x2", "rp.satfinite.ue8m0x2.f32",
                                  "rp.ue8m0x2.f32", "rz.satfinite.ue8m0x2.f32", "rz.ue8m0x2.bf16x2",
                                  "rz.ue8m0x2.f32"], forms
    before = _ptxas(re.sub(r"\.target\s+sm_100a", ".target sm_90a", original), tmp_path)
    assert before.returncode != 0 and "ue8m0x2" in before.stderr, before.stderr
    new, _ = rewrite(original, toolchain.library_ptx())
    code = ptx_rewrite.strip_comments(new)
    assert not re.search(r"\bcvt\.[\w.]*ue8m0x2", code)
    calls = re.findall(r"call \(emu_ret\d+\), (__nvfp4emu_cvt_\w+)", code)
    assert sorted(calls) == sorted(["__nvfp4emu_cvt_ue8m0x2_f32"] * 5 + ["__nvfp4emu_cvt_ue8m0x2_bf16x2"] * 2
                                   + ["__nvfp4emu_cvt_bf16x2_ue8m0x2"]), calls
    # the mode word: bit 0 .rp, bit 1 .satfinite (rp.satfinite = 3, rz.satfinite = 2, rp = 1, rz = 0)
    modes = re.findall(r"st\.param\.b32 \[emu_p\d+\], (\d);\s*call \(emu_ret\d+\), __nvfp4emu_cvt_ue8m0x2_f32", code)
    assert sorted(modes) == ["0", "1", "2", "3", "3"], modes
    assert re.search(r"cvt\.u16\.u32 %rs\d+, %emu_t\d+;", code)            # the .b16 destination of ue8m0x2
    done = _ptxas(new, tmp_path)
    assert done.returncode == 0, done.stderr


def test_ue8m0_conversions_take_immediates_and_guards(tmp_path):
    """Hand-written PTX: f32 immediates (0f...) go to the library as their bits; a guard guards call and result."""
    body = ("@%p1 cvt.rp.satfinite.ue8m0x2.f32 %rs1, 0f3FC00000, 0f00000000;\n"
            "cvt.rn.bf16x2.ue8m0x2 %r2, %rs1;\n"
            "cvt.rz.ue8m0x2.bf16x2 %rs2, %r2;\n")
    module = MODULE.replace(".reg .pred %p<2>;", ".reg .pred %p<2>;\n.reg .b16 %rs<3>;").replace("BODY", body)
    new, _ = rewrite(module, "")
    assert "st.param.b32 [emu_p1], 0x3FC00000;" in new and "st.param.b32 [emu_p2], 0x00000000;" in new
    assert re.search(r"@%p1 call \(emu_ret\d+\), __nvfp4emu_cvt_ue8m0x2_f32", new) and "@%p1 cvt.u16.u32 %rs1," in new
    assert re.search(r"cvt\.u32\.u16 %emu_t\d+, %rs1;", new) and "mov.b32 %r2, %emu_t" in new


CLC = os.path.join(ROOT, "tests", "blackwell", "clc.cu")


@needs_nvcc
def test_cluster_launch_control_cancels_from_the_library_and_assembles(emulation_env, tmp_path):
    original = _ptx(CLC, tmp_path, "clc", "-DCLC_KERNELS_ONLY")
    forms = ["try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.multicast::cluster::all.b128 [",
             "try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128 [",
             "try_cancel.async.mbarrier::complete_tx::bytes.b128 [", "query_cancel.is_canceled.pred.b128 ",
             "query_cancel.get_first_ctaid.v4.b32.b128 {", "query_cancel.get_first_ctaid::x.b32.b128 "]
    for form in forms:
        assert "clusterlaunchcontrol." + form in original, form
    before = _ptxas(re.sub(r"\.target\s+sm_100a", ".target sm_90a", original), tmp_path)
    assert before.returncode != 0 and "clusterlaunchcontrol" in before.stderr, before.stderr
    new, sites = rewrite(original, toolchain.library_ptx())
    code = ptx_rewrite.strip_comments(new)
    assert "clusterlaunchcontrol" not in code
    # each is a site, which a device fault's line reads to name cluster launch control
    assert sum("clusterlaunchcontrol." in site.instruction for site in sites) == original.count("clusterlaunchcontrol.")
    # every try_cancel asks the library, writes its answer in the response's low 8 bytes (the high 8 are 0) and
    # completes 16 bytes of transaction; the multicast form does so at the same offsets in every CTA of the cluster
    assert len(re.findall(r"call \(emu_ret_clc\d+\), __nvfp4emu_clc_try_cancel;", code)) == 3
    assert len(re.findall(r"st\.shared(::cluster)?\.v4\.b32 \[[%\w]+\], \{%emu_t\d+, %emu_t\d+, (%emu_t\d+), \2\};",
                          code)) == 3
    assert len(re.findall(r"mbarrier\.complete_tx\.relaxed\.cluster\.shared::(cta|cluster)\.b64 \[[%\w]+\], 16;",
                          code)) == 3
    assert re.search(r"mov\.u32 %emu_t\d+, %cluster_nctarank;(.*\n)*?.*mapa\.shared::cluster\.u32", code)
    # query_cancel reads the answer back: is_canceled is bit 63, the first CTA's x, y, z 21 bits each
    assert re.search(r"mov\.b128 \{(%emu_t\d+), %emu_t\d+\}, [%\w]+;\s*setp\.lt\.s64 p1, \1, 0;", code)
    assert len(re.findall(r"and\.b32 %r\d+, %emu_t\d+, 0x1FFFFF;", code)) == 4      # x, y, z, then ::x alone
    # every kernel starts by asking whether its cluster was canceled, and exits then
    entries = len(re.findall(r"\.entry\s", code))
    assert entries == 2 and len(re.findall(r"call \(emu_clc_ret\), __nvfp4emu_clc_enter;", code)) == entries
    assert len(re.findall(r"@%emu_clc_p exit;", code)) == entries
    done = _ptxas(new, tmp_path)
    assert done.returncode == 0, done.stderr


LOOK_ALIKE = '''
import torch
from torch.utils.cpp_extension import load_inline

COMMON = r"""
#include <cuda_fp4.h>
#include <cuda_fp16.h>
constexpr int LANES = 32;
"""
FORWARD = r"""
__global__ void fwd(const float* x, unsigned short* y) {
  y[threadIdx.x % LANES] = __nv_cvt_float2_to_fp4x2(make_float2(x[0], x[1]), __NV_E2M1, cudaRoundNearest);
}
"""
PAIRS = r"""
__global__ void pairs(const float* x, unsigned int* y) {
  uint32_t t;
  asm volatile("tcgen05.shift.cta_group::1.down [%0];" :: "r"(0u));
  y[threadIdx.x % LANES] = (unsigned int)x[0];
}
"""
for i, src in enumerate([FORWARD, PAIRS]):
    load_inline(f"variant{i}", cpp_sources="", cuda_sources=COMMON + src, no_implicit_headers=True,
                extra_cuda_cflags=["-O3", "-gencode=arch=compute_100a,code=sm_100a"])
'''


@needs_nvcc
def test_compile_emulate_blackwell_says_without_a_gpu_what_an_h100_could_run(tmp_path):
    path = tmp_path / "submission.py"
    path.write_text(LOOK_ALIKE)
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    run = subprocess.run([sys.executable, os.path.join(ROOT, "eval.py"), "compile", "--emulate-blackwell",
                          "--submission", str(path)], capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)
    out = run.stdout
    assert run.returncode == 112, out + run.stderr
    assert "sm_100a emulated: 1 built, 1 failed" in out, out
    problem = [line for line in out.splitlines() if line.startswith("✘")]
    assert len(problem) == 1 and "COMMON+PAIRS (sm_100a emulated) does not compile: emulate-blackwell: cannot emulate" \
        in problem[0] and "tcgen05.shift" in problem[0], out


def _cell(shape: str, lane: int, reg: int) -> tuple[int, int]:
    """(TMEM lane, column) of register `reg` of thread `lane`: the PTX ISA fragment tables."""
    if shape == "32x32b":
        return lane, reg
    if shape == "16x64b":
        return lane // 4 + 8 * (lane % 2), (lane // 2) % 2 + 2 * reg
    if shape == "16x128b":
        return lane // 4 + 8 * (reg % 2), lane % 4 + 4 * (reg // 2)
    return lane // 4 + 8 * ((reg // 2) % 2), reg % 2 + 2 * (lane % 4) + 8 * (reg // 4)


@pytest.mark.parametrize("shape", list(ptx_rewrite.LD_SHAPES))
def test_ld_st_offsets_are_the_same_for_every_thread_and_cover_the_block_once(shape):
    count = 8 * ptx_rewrite.LD_REGS_PER_REPEAT[shape]
    offsets = ptx_rewrite.ld_st_offsets(shape, count)
    cells = set()
    for lane in range(32):
        first = _cell(shape, lane, 0)
        for reg, offset in enumerate(offsets):
            row, col = _cell(shape, lane, reg)
            assert offset == 4 * ((row - first[0]) * ptx_rewrite.TMEM_COLUMNS + (col - first[1]))
            cells.add((row, col))
    assert len(cells) == 32 * count          # no two threads or registers share a cell


def _ld_st_check():
    """bench/emulation/ld_st_tables_check.py: the ld/st expectations derived from CUTLASS's encoding of the PTX
    ISA's fragment figures (not from the library's table)."""
    return load_file(os.path.join(ROOT, "bench", "emulation", "ld_st_tables_check.py"), "ld_st_tables_check")


# CUTLASS include/cute/atom/copy_traits_sm100.hpp, Copy_Traits<SM100_TMEM_LOAD_*>::DstLayout (flattened): the
# cases the checker's one rule in .num was read from.
CUTLASS_DST_LAYOUTS = {
    ("32x32b", 1): ((32,), (32,), (32,), (1,)),
    ("32x32b", 4): ((32,), (128,), (128,), (1,)),
    ("16x64b", 1): ((2, 2, 8), (512, 32, 64), (32, 1), (1, 64)),
    ("16x64b", 2): ((2, 2, 8), (1024, 32, 128), (32, 2), (1, 64)),
    ("16x64b", 4): ((2, 2, 8), (2048, 32, 256), (32, 4), (1, 64)),
    ("16x64b", 8): ((2, 2, 8), (4096, 32, 512), (32, 8), (1, 64)),
    ("16x128b", 1): ((4, 8), (32, 128), (32, 2, 1), (1, 1024, 128)),
    ("16x128b", 2): ((4, 8), (32, 256), (32, 2, 2), (1, 2048, 128)),
    ("16x128b", 4): ((4, 8), (32, 512), (32, 2, 4), (1, 4096, 128)),
    ("16x256b", 1): ((4, 8), (64, 256), (64, 2, 1), (1, 2048, 256)),
    ("16x256b", 2): ((4, 8), (64, 512), (64, 2, 2), (1, 4096, 256)),
    ("16x256b", 4): ((4, 8), (64, 1024), (64, 2, 4), (1, 8192, 256)),
}


def test_the_ld_st_expectation_rule_reproduces_the_transcribed_cutlass_layouts():
    check = _ld_st_check()
    for (shape, num), layout in CUTLASS_DST_LAYOUTS.items():
        assert check._copy_layouts(shape, num)[:4] == layout, (shape, num)


@pytest.mark.parametrize("shape", list(ptx_rewrite.LD_SHAPES))
def test_the_library_ld_st_table_equals_the_expectation_derived_from_the_isa_figures(shape):
    """The library's per-thread table (_cell, as in tcgen05_library.cu) plus the rewriter's per-register offsets
    give, for .x1 to .x128, the cell the checker derives independently (bench/emulation/ld_st_tables_check.py)."""
    check = _ld_st_check()
    for num in (1, 2, 4, 8, 16, 32, 64, 128):
        count = ptx_rewrite.LD_REGS_PER_REPEAT[shape] * num
        offsets = ptx_rewrite.ld_st_offsets(shape, count)
        for lane in range(32):
            first = check.expected_cell(shape, num, lane, 0)
            assert _cell(shape, lane, 0) == first, (num, lane)
            for reg, offset in enumerate(offsets):
                row, col = check.expected_cell(shape, num, lane, reg)
                assert offset == 4 * ((row - first[0]) * ptx_rewrite.TMEM_COLUMNS + (col - first[1])), (num, lane, reg)


def _simulated_ld_st_kernel(check, cell, cp_lanes):
    """tests/blackwell/ld_st_tables.cu's output words, computed with the table `cell(shape, lane, reg)`."""
    tmem = {}
    words = []
    for lane in range(128):
        for col in range(128):
            tmem[(lane, col)] = lane * 1000 + col
    for shape, num, half in check.LD_CASES:
        for t in range(128):
            w, l = divmod(t, 32)
            for r in range(check.REGS_PER_REPEAT[shape] * num):
                dl, dc = cell(shape, l, r)
                words.append(tmem[(32 * w + 16 * half + dl, check.LD_COL + dc)])
    for index, (shape, num, half) in enumerate(check.ST_CASES):
        for lane in range(128):
            for col in range(128, 160):
                tmem[(lane, col)] = 0x40000000 + lane * 1000 + col
        for t in range(128):
            w, l = divmod(t, 32)
            for r in range(check.REGS_PER_REPEAT[shape] * num):
                dl, dc = cell(shape, l, r)
                tmem[(32 * w + 16 * half + dl, check.ST_COL + dc)] = 0x80000000 | index << 20 | t << 8 | r
        words += [tmem[(t, check.ST_READ + j)] for t in range(128) for j in range(32)]
    cp = {lane: r for r, lane in enumerate(cp_lanes)}
    words += [(0xC0000000 | cp[t] << 8 | j) if t in cp else 0x40000000 + t * 1000 + check.CP_COL + j
              for t in range(128) for j in range(8)]
    assert len(words) == check.output_words()
    return words


def test_the_ld_st_checker_passes_the_library_table_and_names_a_wrong_one():
    check = _ld_st_check()
    rows = check.compare(_simulated_ld_st_kernel(check, _cell, [0, 1, 2, 3]))
    assert [name for name, _ in rows] == ["ld 32x32b", "ld 16x64b", "ld 16x128b", "ld 16x256b", "st 32x32b",
                                          "st 16x64b", "st 16x128b", "st 16x256b", "cp 4x256b (row r -> lane r)"]
    assert all(problem is None for _, problem in rows), rows

    def swapped(shape, lane, reg):      # 16x64b with the two lane bits of the figure swapped
        if shape == "16x64b":
            return lane // 4 + 8 * ((lane // 2) % 2), lane % 2 + 2 * reg
        return _cell(shape, lane, reg)
    rows = dict(check.compare(_simulated_ld_st_kernel(check, swapped, [0, 32, 64, 96])))
    assert rows["ld 16x64b"].startswith("ld .x1: thread 1 register 0: got ") and rows["st 16x64b"]
    assert rows["ld 16x128b"] is None and rows["st 16x256b"] is None
    assert rows["cp 4x256b (row r -> lane r)"].endswith("(it matches CUTLASS's lane 32 r instead)")


def test_an_error_record_reads_as_one_line_naming_the_instruction():
    record = [7, 3, 0x200000, 1, 5, 0, 0, 33] + [0] * 8
    text = runtime.describe(record, {3: "tcgen05.ld.sync.aligned.32x32b.x32.b32 {...}, [%r9];"})
    assert "\n" not in text
    assert "warp 1" in text and "32-lane quarter" in text and "tcgen05.ld.sync.aligned.32x32b" in text
    assert "CTA (5,0,0) thread 33" in text


def test_eval_refuses_emulation_without_a_hopper_gpu(tmp_path):
    import torch
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    done = subprocess.run([sys.executable, os.path.join(ROOT, "eval.py"), "test", "--emulate-blackwell", "-q",
                           "--submission", os.path.join(ROOT, "submission.py")],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 2
    assert "error: --emulate-blackwell needs a Hopper GPU (sm_90a): no CUDA GPU was found" in done.stderr


def test_benchmark_has_no_emulation_option():
    done = subprocess.run([sys.executable, os.path.join(ROOT, "eval.py"), "benchmark", "--emulate-blackwell"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 2 and "No such option '--emulate-blackwell'" in done.stderr   # never timed


SF_LAYOUT = os.path.join(ROOT, "tests", "blackwell", "sf_layout.cu")


@needs_nvcc
def test_cutlass_scale_factor_layout_is_the_competitions_permuted_storage(tmp_path):
    """tests/submissions/cutlass_sm100_nvfp4.py passes sfa_permuted / sfb_permuted's storage to CUTLASS as they are:
    CUTLASS's Sm1xxBlkScaledConfig::tile_atom_to_shape_SFA (run on the host) puts every scale (row, K-block, batch)
    where the competition's permuted tensor stores it, padding (rows to 128, K-blocks to 4) and batches included."""
    import torch

    from arena.compile.nvcc import cutlass_include_dirs
    from arena.nvfp4.layouts import to_permuted
    headers = cutlass_include_dirs()
    if not headers:
        pytest.skip("CUTLASS headers not installed (nvidia-cutlass or CUTLASS_PATH)")
    exe = str(tmp_path / "sf_layout")
    subprocess.run([NVCC, "-std=c++17", "--expt-relaxed-constexpr", *[f"-I{h}" for h in headers], "-o", exe,
                    SF_LAYOUT], check=True, capture_output=True, text=True, timeout=300)
    shapes = [(128, 64, 1), (256, 256, 2), (200, 96, 3), (384, 1024, 2)]
    out = subprocess.run([exe], input="".join(f"{mn} {k} {l}\n" for mn, k, l in shapes), capture_output=True,
                         text=True, timeout=60, check=True).stdout.splitlines()
    for (mn, k, l), line in zip(shapes, out):
        offsets = [int(x) for x in line.split()]
        plain = torch.arange(mn * (k // 16) * l, dtype=torch.float32).reshape(l, mn, k // 16).permute(1, 2, 0)
        storage = to_permuted(plain).permute(5, 2, 4, 0, 1, 3)       # its contiguous (L, rb, cb, 32, 4, 4) buffer
        assert storage.is_contiguous()
        flat = storage.reshape(-1)
        expected = plain.permute(2, 0, 1).reshape(-1)              # batch, row, K-block: the program's order
        assert torch.equal(flat[torch.tensor(offsets)], expected), (mn, k, l)


@needs_nvcc
def test_our_cutlass_sm100_submission_builds_under_emulation():
    """tests/submissions/cutlass_sm100_nvfp4.py (CUTLASS 4.2's SM100 NVFP4 GEMM through its CollectiveBuilder, the
    1-SM Nvf4 schedule with the CLC scheduler): `eval.py compile --emulate-blackwell` builds it (2-3 minutes)."""
    from arena.compile.nvcc import cutlass_include_dirs
    if not cutlass_include_dirs():
        pytest.skip("CUTLASS headers not installed (nvidia-cutlass or CUTLASS_PATH)")
    done = subprocess.run([sys.executable, os.path.join(ROOT, "eval.py"), "compile", "--emulate-blackwell",
                           "--submission", os.path.join(ROOT, "tests", "submissions", "cutlass_sm100_nvfp4.py")],
                          capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "sm_100a emulated: 1 built" in done.stdout, done.stdout[-3000:]


@needs_nvcc
def test_256_bit_global_loads_and_stores_become_two_128_bit_ones(emulation_env, tmp_path):
    body = ("ld.global.nc.v8.f32 {%f1, %f2, %f3, %f4, %f5, %f6, %f7, %f8}, [%rd1+64];\n"
            "@%p1 st.global.v8.b32 [%rd1], {%r1, %r2, %r3, %r1, %r2, %r3, %r1, %r2};")
    module = MODULE.replace(".reg .pred %p<2>;", ".reg .pred %p<2>;\n.reg .f32 %f<9>;").replace("BODY", body)
    assert _ptxas(module.replace("sm_100a", "sm_90a"), tmp_path).returncode != 0     # sm_90 has no .v8
    new, _ = rewrite(module, toolchain.library_ptx())
    code = ptx_rewrite.strip_comments(new)
    assert ".v8" not in code
    assert "ld.global.nc.v4.f32 {%f5, %f6, %f7, %f8}, [%rd1+80];" in code
    assert "@%p1 st.global.v4.b32 [%rd1+16], {%r2, %r3, %r1, %r2};" in code
    done = _ptxas(new, tmp_path)
    assert done.returncode == 0, done.stderr


def test_a_cp_shape_is_recognised_with_its_warpx_modifier_first_as_triton_writes_it():
    for spelling in ("32x128b.warpx4", "warpx4.32x128b"):
        new, _ = rewrite(MODULE.replace("BODY", f"tcgen05.cp.cta_group::1.{spelling} [%r1], %rd1;"),
                         ".version 8.7\n.target sm_90a\n.address_size 64\n")
        code = ptx_rewrite.strip_comments(new)
        assert re.search(r"st\.param\.b32 \[emu_p\d+\], 5;\s*call __nvfp4emu_cp,", code), code


def test_another_checkout_or_interpreter_gets_an_emulation_folder_of_its_own(tmp_path):
    """The folder's scripts name the interpreter and the checkout's shims.py: a fresh clone beside an older one
    must never run the other's scripts (which break when that checkout moves or goes)."""
    try:
        toolchain.cuda_home()
    except toolchain.ToolchainError:
        pytest.skip("no CUDA toolkit")
    copy = tmp_path / "clone"
    copy.mkdir()
    subprocess.run(["cp", "-r", os.path.join(ROOT, "arena"), str(copy / "arena")], check=True)
    ask = "from arena.blackwell import toolchain; print(toolchain.library_version())"
    here = subprocess.run([sys.executable, "-c", ask], cwd=ROOT, capture_output=True, text=True, check=True)
    there = subprocess.run([sys.executable, "-c", ask], cwd=copy, capture_output=True, text=True, check=True)
    assert here.stdout.strip() == toolchain.library_version()
    assert there.stdout.strip() != here.stdout.strip()


@needs_nvcc
@pytest.mark.slow
def test_evaluations_started_together_on_a_fresh_machine_all_get_the_whole_library(tmp_path):
    """A batch starts many evaluations at once, and the first ones on a machine find no emulation folder yet:
    each must wait for the one building it and read the whole library.ptx, never a file another nvcc is still
    writing (a batch of 40 on four H200s: 39 ended in "ptxas: Parsing error" on a half-written library.ptx)."""
    ask = ("import hashlib, os, sys; from arena.blackwell import toolchain; "
           "os.environ.update(toolchain.prepare(sys.argv[1])); "
           "print(hashlib.sha256(toolchain.library_ptx().encode()).hexdigest())")
    starters = [subprocess.Popen([sys.executable, "-c", ask, str(tmp_path / "emulation")], cwd=ROOT,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(6)]
    answers = [starter.communicate(timeout=600) for starter in starters]
    assert [starter.returncode for starter in starters] == [0] * 6, [err[-300:] for _, err in answers]
    digests = {out.strip() for out, _ in answers}
    assert len(digests) == 1
    built = subprocess.run([toolchain.real_tool("ptxas"),
                            "-arch=sm_90a", "-c", str(next((tmp_path / "emulation").glob("*/library.ptx"))),
                            "-o", str(tmp_path / "library.o")], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-500:]


@needs_nvcc
def test_packed_f32_pair_arithmetic_becomes_two_f32_operations(emulation_env, tmp_path):
    """sm_100's .f32x2 forms (Triton 3.6's mul.f32x2 for sm_100) are the f32 operation on each half of the .b64
    operands (element 0 in the low word); a guard stays on the result."""
    body = ("mul.rn.f32x2 %rd1, %rd2, %rd3;\n@%p1 add.rz.ftz.f32x2 %rd2, %rd1, %rd3;\n"
            "fma.rn.f32x2 %rd3, %rd1, %rd2, %rd3;\nsub.f32x2 %rd1, %rd3, %rd2;")
    module = MODULE.replace("BODY", body)
    assert _ptxas(module.replace("sm_100a", "sm_90a"), tmp_path).returncode != 0     # sm_90 has no .f32x2
    assert _ptxas(module, tmp_path, arch="sm_100a").returncode == 0, "the forms above are valid sm_100a PTX"
    new, _ = rewrite(module, toolchain.library_ptx())
    code = ptx_rewrite.strip_comments(new)
    assert "f32x2" not in code
    assert re.search(r"mov\.b64 \{(%emu_t\d+), (%emu_t\d+)\}, %rd2;", code)
    assert re.search(r"mul\.rn\.f32 %emu_t\d+, %emu_t\d+, %emu_t\d+;", code)
    assert re.search(r"fma\.rn\.f32 %emu_t\d+, %emu_t\d+, %emu_t\d+, %emu_t\d+;", code)
    assert re.search(r"@%p1 mov\.b64 %rd2, \{%emu_t\d+, %emu_t\d+\};", code)
    done = _ptxas(new, tmp_path)
    assert done.returncode == 0, done.stderr


@needs_nvcc
def test_ptx_the_b200s_ptxas_rejects_is_a_build_failure_not_an_emulation_limit(emulation_env, tmp_path):
    """The ptxas shim first assembles the submission's own PTX for its Blackwell target: what that rejects fails
    the B200's build too (the submission's fault, a failure); only what it accepts and the rewrite cannot carry
    is the emulation's limit ("cannot emulate", which the worker reports as cannot judge)."""
    from arena.blackwell import shims
    bad = tmp_path / "bad.ptx"
    bad.write_text(MODULE.replace("BODY", "add.u32 %r1, %r2;"))          # one operand short
    args = ["-arch=sm_100a", str(bad), "-o", str(tmp_path / "bad.cubin")]
    said = shims._blackwell_ptxas_rejects(toolchain.real_tool("ptxas"), args)
    assert said.startswith("ptxas for sm_100a (the B200's target) rejects the submission's PTX"), said
    assert "cannot emulate" not in said
    good = tmp_path / "good.ptx"
    good.write_text(MODULE.replace("BODY", "add.u32 %r1, %r2, %r3;"))
    assert shims._blackwell_ptxas_rejects(toolchain.real_tool("ptxas"), [args[0], str(good), "-o", args[3]]) is None
    assert not (tmp_path / "bad.cubin").exists()          # the check writes elsewhere


def _run_ptx_alu(lines: list[str], registers: dict[str, int]) -> dict[str, int]:
    """The few 32-bit ALU instructions the inline FP4 conversion emits, executed as the PTX ISA states them (prmt's
    default mode: each selector nibble's low three bits pick a byte of {b, a}, bit 3 replicates its sign)."""
    def value(x):
        return registers[x] if x in registers else int(x, 0)
    for line in lines:
        op, args = line.rstrip(";").split(None, 1)
        d, *src = [a.strip() for a in args.split(",")]
        v = [value(a) for a in src]
        if op.startswith(("mov.", "cvt.u32")):
            out = v[0]
        elif op == "shl.b32":
            out = v[0] << v[1]
        elif op == "and.b32":
            out = v[0] & v[1]
        elif op == "or.b32":
            out = v[0] | v[1]
        elif op == "prmt.b32":
            pool = (v[0] & 0xFFFFFFFF) | (v[1] & 0xFFFFFFFF) << 32
            out = 0
            for i in range(4):
                sel = (v[2] >> (4 * i)) & 0xF
                byte = (pool >> (8 * (sel & 7))) & 0xFF
                out |= (0xFF if byte & 0x80 else 0) << (8 * i) if sel & 8 else byte << (8 * i)
        else:
            raise AssertionError(f"unexpected instruction {line!r}")
        registers[d] = out & 0xFFFFFFFF
    return registers


def test_the_inline_fp4_to_f16_conversion_is_exact_for_every_pair():
    """cvt.rn.f16x2.e2m1x2 becomes straight-line PTX; run as the ISA states it, every one of the 256 inputs (and
    garbage above the byte, which a .b16 source register may hold) gives the exact f16 pair, low nibble first."""
    import struct
    new, _ = rewrite(".version 8.7\n.target sm_100a\n.address_size 64\n.visible .entry k()\n{\n.reg .b16 %rs<2>;\n"
                     ".reg .b32 %r<2>;\ncvt.rn.f16x2.e2m1x2 %r1, %rs1;\nret;\n}\n", toolchain.library_ptx())
    block = re.search(r"\{ // nvfp4-arena emulation\n(.*?)\n\t\}", new, re.S).group(1)
    lines = [x.strip() for x in block.splitlines() if x.strip() and not x.strip().startswith(".reg")]
    assert not any(x.startswith("call") for x in lines)
    magnitudes = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    for pair in range(256):
        registers = _run_ptx_alu(lines, {"%rs1": pair | 0xA500})
        got = registers["%r1"]
        for half, nibble in ((got & 0xFFFF, pair & 0xF), (got >> 16, pair >> 4)):
            want = magnitudes[nibble & 7] * (-1 if nibble & 8 else 1)
            assert struct.unpack("<e", struct.pack("<H", half))[0] == want and (half >> 15) == (nibble >> 3), \
                (pair, hex(got))
