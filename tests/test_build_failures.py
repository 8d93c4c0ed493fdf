"""A build that fails is named in one line, the same way by `eval.py compile` and by `test` (whose load_inline
builds fail inside torch): a missing header (CUTLASS's with the install command), an instruction the arch lacks,
the first error with its file and line. Real nvcc and g++ output; `test` as a real subprocess."""
import subprocess

import pytest

from arena.compile import build_failure, cutlass_include_dirs, find_tool
from arena.compile.diagnosis import CUTLASS_MISSING
from tests.evalrun import SMALL, run_eval, spec_file, submission

needs_nvcc = pytest.mark.skipif(find_tool("nvcc") is None, reason="nvcc not installed")
no_cutlass = pytest.mark.skipif(cutlass_include_dirs() is not None, reason="CUTLASS headers are installed here")


def nvcc_log(tmp_path, text: str, *flags: str) -> str:
    path = tmp_path / "k.cu"
    path.write_text(text)
    done = subprocess.run([find_tool("nvcc"), *flags, "-c", str(path), "-o", str(tmp_path / "k.o")],
                          capture_output=True, text=True)
    assert done.returncode != 0
    return done.stdout + done.stderr


@needs_nvcc
@no_cutlass
def test_a_missing_cutlass_header_names_the_install_command(tmp_path):
    log = nvcc_log(tmp_path, "#include <cutlass/cutlass.h>\n__global__ void k() {}\n")
    assert build_failure(log) == CUTLASS_MISSING
    assert "pip install --no-deps nvidia-cutlass==" in CUTLASS_MISSING


@needs_nvcc
def test_another_missing_header_is_named_with_its_line(tmp_path):
    log = nvcc_log(tmp_path, "// first\n#include <no_such_header.h>\n")
    assert build_failure(log) == "header <no_such_header.h> not found (k.cu:2)"


@needs_nvcc
def test_an_instruction_the_arch_lacks_is_named_from_ptxas(tmp_path):
    source = '__global__ void k() { asm volatile("tcgen05.fence::before_thread_sync;"); }\n'
    line = build_failure(nvcc_log(tmp_path, source, "-arch=sm_90a"))
    assert line.startswith("ptxas: Instruction 'tcgen05.fence' not supported on .target 'sm_90"), line


@needs_nvcc
def test_a_syntax_error_is_the_first_error_with_file_and_line(tmp_path):
    source = "__global__ void k(float* x) {\n    x[0] = undefined_name;\n    int y = ;\n}\n"
    assert build_failure(nvcc_log(tmp_path, source)) == 'k.cu:2: error: identifier "undefined_name" is undefined'


@no_cutlass
def test_test_names_missing_cutlass_headers_of_a_load_inline_source():
    """On a CPU-only torch load_inline cannot start nvcc; the missing headers are named all the same. The
    competition's runners have CUTLASS, so the file is not judged here (exit 114), not failed: a kernel that passes
    on a B200 must not read as broken on a machine without the headers."""
    run = run_eval("test", spec_file(SMALL), "--submission", submission("cutlass_headers_missing.py"), popcorn=True)
    assert run.code == 114, run.stdout[-2000:]
    assert run.keys["test.0.error"] == (f"cannot import submission: cannot judge here: CUDA_SRC does not build: "
                                        f"{CUTLASS_MISSING}")
    assert "Error building extension" not in run.stderr.splitlines()[-1]


@pytest.mark.slow       # g++ builds torch's extension header: about 20 s
@pytest.mark.skipif(find_tool("g++") is None and find_tool("c++") is None, reason="no C++ compiler")
def test_test_names_the_file_and_line_of_a_failing_extension_build():
    run = run_eval("test", spec_file(SMALL), "--submission", submission("extension_syntax_error.py"), popcorn=True)
    assert run.code == 112
    error = run.keys["test.0.error"]
    assert error.startswith("cannot import submission: extension 'passthrough_ext' does not build: main.cpp:5: "
                            "error: expected"), error


@pytest.mark.slow       # g++ builds torch's extension header: about 20 s
@pytest.mark.skipif(find_tool("g++") is None and find_tool("c++") is None, reason="no C++ compiler")
def test_a_build_at_the_first_call_is_named_as_at_import():
    """JIT submissions build inside custom_kernel: the build's cause, not "Error building extension" (nor, under
    --emulate-blackwell, "needs a Blackwell GPU" because the build's command line says sm_100a)."""
    run = run_eval("test", spec_file(SMALL), "--submission", submission("extension_error_at_first_call.py"),
                   popcorn=True)
    assert run.code == 112
    error = run.keys["test.0.error"]
    assert "extension 'passthrough_at_call_ext' does not build: main.cpp:5: error: expected" in error, error


@pytest.mark.slow       # g++ builds torch's extension header: about 20 s
@pytest.mark.skipif(find_tool("g++") is None and find_tool("c++") is None, reason="no C++ compiler")
def test_a_build_that_failed_at_the_first_call_is_named_again_at_the_next():
    """torch does not rebuild sources it has tried: the second call imports a library the failed build never
    wrote. That case gets the build's cause too, not "cannot open shared object file"."""
    run = run_eval("test", spec_file(SMALL), "--submission", submission("extension_error_at_first_call.py"),
                   popcorn=True)
    assert run.code == 112
    for case in ("test.0.error", "test.1.error"):
        assert "extension 'passthrough_at_call_ext' does not build: main.cpp:5: error: expected" in run.keys[case], \
            run.keys[case]


@needs_nvcc
def test_a_header_missing_inside_cutlass_names_an_incomplete_copy(tmp_path):
    """CUTLASS present but one of its files gone (a partial install, or two versions mixed): say so, not that
    CUTLASS is not installed."""
    atom = tmp_path / "include" / "cute" / "atom"
    atom.mkdir(parents=True)
    (atom / "mma_atom.hpp").write_text("#pragma once\n#include <cute/atom/mma_traits_sm90_gmma.hpp>\n")
    log = nvcc_log(tmp_path, "#include <cute/atom/mma_atom.hpp>\n__global__ void k() {}\n",
                   f"-I{tmp_path / 'include'}")
    line = build_failure(log)
    assert line.startswith("header <cute/atom/mma_traits_sm90_gmma.hpp> not found, included by CUTLASS's own "), line
    assert "mma_atom.hpp:2: an incomplete or mixed copy of CUTLASS" in line and "pip install" in line
    assert line != CUTLASS_MISSING
