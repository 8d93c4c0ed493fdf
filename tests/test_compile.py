"""`eval.py compile`: finding CUDA sources without running the submission, ptxas parsing, real nvcc builds."""
import textwrap

import pytest

from arena import compile as arena_compile
from arena.compile import find_tool
from tests.evalrun import run_eval

needs_nvcc = pytest.mark.skipif(find_tool("nvcc") is None, reason="nvcc not installed")

SUBMISSION = textwrap.dedent('''
    import torch
    HEADER = "#include <cuda_fp16.h>\\n"
    PLAIN = HEADER + r"""
    __global__ void scale(float* x, float s) { x[threadIdx.x] *= s; }
    """
    NOT_CUDA = "just text"
    BUILT_AT_RUN_TIME = f"{HEADER} __global__ void k() {{}}"
    def custom_kernel(data):
        return data[-1]
''')


def write(tmp_path, text, name="submission.py"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_sources_are_module_level_string_constants_with_kernels(tmp_path):
    sources = arena_compile.cuda_sources(write(tmp_path, SUBMISSION))
    assert list(sources) == ["PLAIN"]            # f-strings and plain text are not CUDA sources we can see
    assert sources["PLAIN"].startswith("#include <cuda_fp16.h>\n") and "__global__ void scale" in sources["PLAIN"]


def test_target_archs_from_marks_or_from_the_ptx_used():
    assert arena_compile.target_archs("// arena: arch sm_90a\n// arena: arch sm_100a\n") == ["sm_90a", "sm_100a"]
    assert arena_compile.target_archs('asm("tcgen05.mma.cta_group::1 ...");') == ["sm_100a"]
    assert arena_compile.target_archs('asm("wgmma.mma_async.sync ...");') == ["sm_90a"]
    assert arena_compile.target_archs("__global__ void k() {}") is None


def test_ptxas_log_parsing_finds_registers_smem_and_spills():
    log = textwrap.dedent("""
        ptxas info    : Compiling entry function '_Z4gemmv' for 'sm_90a'
        ptxas info    : Function properties for _Z4gemmv
            48 bytes stack frame, 24 bytes spill stores, 16 bytes spill loads
        ptxas info    : Used 168 registers, used 1 barriers, 1024 bytes smem, 400 bytes cmem[0]
    """)
    (kernel,) = arena_compile.parse_ptxas(log)
    assert (kernel.name, kernel.registers, kernel.smem, kernel.stack, kernel.spill_stores, kernel.spill_loads) == \
        ("_Z4gemmv", 168, 1024, 48, 24, 16)
    build = arena_compile.Build(source="X", arch="sm_90a", status=arena_compile.BUILT, kernels=[kernel])
    assert arena_compile.problems([build], expect_mma=True) == ["X (sm_90a): 40 bytes of register spills",
                                                                "X (sm_90a): no HGMMA (wgmma) instruction in the SASS"]
    assert arena_compile.problems([build], expect_mma=False) == ["X (sm_90a): 40 bytes of register spills"]


@needs_nvcc
def test_a_kernel_without_tensor_cores_fails_the_compile_check(tmp_path):
    run = run_eval("compile", "--arch", "sm_90a", "--submission", write(tmp_path, SUBMISSION))
    assert run.code == 112
    assert "PLAIN (sm_90a): no HGMMA (wgmma) instruction in the SASS" in run.stdout


@needs_nvcc
def test_a_build_error_is_one_line_naming_the_source(tmp_path):
    broken = 'SRC = r"""\n__global__ void k(float* x) { x[0] = undefined_name; }\n"""\n'
    run = run_eval("compile", "--arch", "sm_90a", "--submission", write(tmp_path, broken))
    assert run.code == 112
    assert "SRC (sm_90a) does not compile:" in run.stdout and "undefined_name" in run.stdout


def test_no_cuda_source_is_a_clear_error(tmp_path):
    run = run_eval("compile", "--arch", "sm_90a", "--submission", write(tmp_path, "def custom_kernel(d):\n    return d\n"))
    assert run.code == 112 and "has no CUDA source" in run.stdout
