"""`eval.py compile` on the kinds of sources real submissions hold, as torch's load_inline would build them.

Every CUDA source here is a small look-alike written for this test (no third-party code): load_inline calls
with their own flags and include folders, <Python.h> / <torch/extension.h> includes, CUTLASS-style sources
without any `__global__`, sources written only for sm_100a, a CUDA-core GEMV kernel and an MMA kernel
beside a CUDA-core epilogue. The builds use the real nvcc; they skip with one reason without it.
"""
import os
import subprocess
import textwrap

import pytest

from arena import compile as arena_compile
from arena.compile import find_tool
from arena.compile import nvcc as compile_nvcc
from tests.evalrun import ROOT, run_eval

pytestmark = pytest.mark.slow     # nvcc builds: `pytest -m slow`

NVCC = find_tool("nvcc")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc not installed (CUDA toolkit)")
GEMV_TASK = f"{ROOT}/tasks/nvfp4_gemv"


def write(folder, text, name="submission.py"):
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def compile_run(path, *args):
    return run_eval("compile", "--submission", path, *args, timeout=600)


# A load_inline submission with its own flags and include folder; the kernel needs both to build.
OWN_FLAGS = '''
    import torch
    from torch.utils.cpp_extension import load_inline

    KERNEL = r"""
    #include "tile_config.h"
    #ifndef ARENA_TILE
    #error "ARENA_TILE must come from extra_cuda_cflags"
    #endif
    __global__ void scale(float* x) { x[threadIdx.x] *= TILE_SCALE * ARENA_TILE; }
    """
    FLAGS = ["-O3", "-DARENA_TILE=4", "-gencode=arch=compute_90a,code=sm_90a"]

    def _module():
        return load_inline(name="own_flags", cpp_sources="", cuda_sources=[KERNEL], extra_cuda_cflags=FLAGS,
                           extra_include_paths=["include"], no_implicit_headers=True)

    def custom_kernel(data):
        return _module()
'''


def test_load_inline_sources_carry_their_flags_includes_and_targets(tmp_path):
    (source,) = arena_compile.find_sources(write(tmp_path, OWN_FLAGS))
    assert source.name == "KERNEL" and source.extension == "own_flags"
    assert source.flags == ["-O3", "-DARENA_TILE=4"]                      # the arch flag picks the target
    assert source.targets == ["sm_90a"] and source.includes == [str(tmp_path / "include")]
    assert source.text.lstrip().startswith('#include "tile_config.h"')   # no_implicit_headers=True


def test_load_inline_adds_torchs_implicit_headers_unless_told_not_to(tmp_path):
    text = '''
        from torch.utils.cpp_extension import load_inline
        SRC = "__global__ void k() {}"
        mod = load_inline("ext", "", cuda_sources=SRC)
    '''
    (source,) = arena_compile.find_sources(write(tmp_path, text))
    assert source.text.startswith("#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n")
    assert source.text.endswith("__global__ void k() {}") and source.targets is None


def test_arch_flags_and_torch_cuda_arch_list_name_the_targets(tmp_path):
    assert arena_compile.split_arch_flags(["-O3", "-gencode", "arch=compute_100a,code=sm_100a", "-lineinfo"]) == \
        (["sm_100a"], ["-O3", "-lineinfo"])
    assert arena_compile.split_arch_flags(["-arch=sm_90a", "--generate-code=arch=compute_100,code=sm_100"]) == \
        (["sm_90a", "sm_100a"], [])
    assert arena_compile.split_arch_flags(["-arch=native"]) == ([], [])
    text = '''
        import os
        os.environ["TORCH_CUDA_ARCH_LIST"] = "10.0a"
        from torch.utils.cpp_extension import load_inline
        SRC = "__global__ void k() {}"
        def build():
            flags = ["-O3"]
            return load_inline(name="x", cpp_sources="", cuda_sources=[SRC], extra_cuda_cflags=flags)
    '''
    (source,) = arena_compile.find_sources(write(tmp_path, text))
    assert source.targets == ["sm_100a"] and source.flags == ["-O3"]


CUTLASS_STYLE = '''
    from torch.utils.cpp_extension import load_inline
    # CUTLASS-style: the kernels come from templates, the source has no __global__ of its own.
    GEMM = r"""
    #include <cute/arena_probe.hpp>
    #include <cutlass/arena_probe.h>
    void launch(float* x) { arena_probe_kernel<<<1, 32>>>(x, cute_probe_value(), cutlass_probe_value()); }
    """

    def _module():
        return load_inline(name="cutlass_style", cpp_sources="", cuda_sources=GEMM, no_implicit_headers=True,
                           extra_cuda_cflags=["-gencode=arch=compute_90a,code=sm_90a"])
'''


def fake_cutlass(root):
    """A CUTLASS-like include tree of our own (include/cute, include/cutlass) with one template kernel."""
    (root / "include" / "cute").mkdir(parents=True)
    (root / "include" / "cutlass").mkdir(parents=True)
    (root / "include" / "cute" / "arena_probe.hpp").write_text("inline __device__ float cute_probe_value() { return 2.f; }\n")
    (root / "include" / "cutlass" / "arena_probe.h").write_text(
        "inline __device__ float cutlass_probe_value() { return 3.f; }\n"
        "template <class T> __global__ void arena_probe_kernel(T* x, T a, T b) { x[threadIdx.x] = a * b; }\n")
    return root


def test_sources_without_global_are_found_through_load_inline_and_cutlass_includes(tmp_path):
    (source,) = arena_compile.find_sources(write(tmp_path, CUTLASS_STYLE))
    assert source.name == "GEMM" and "__global__" not in source.text and source.targets == ["sm_90a"]
    standalone = 'SRC = """#include <cutlass/cutlass.h>\nvoid f() {}\n"""\n'
    assert [s.name for s in arena_compile.find_sources(write(tmp_path, standalone, "plain.py"))] == ["SRC"]


def test_missing_cutlass_headers_fail_with_the_install_line(tmp_path, monkeypatch):
    monkeypatch.setattr(compile_nvcc, "cutlass_include_dirs", lambda: None)     # where build's lookups read them
    monkeypatch.setattr(compile_nvcc, "find_tool", lambda name: "/bin/true")
    (build,) = arena_compile.compile_submission(write(tmp_path, CUTLASS_STYLE), ["sm_90a"])
    assert build.status == arena_compile.FAILED
    assert build.error == "includes CUTLASS headers, which are not installed: python3 -m pip install --no-deps " \
                          "nvidia-cutlass==4.2.0.0 (or set CUTLASS_PATH)"


def test_sources_made_at_run_time_get_a_line_saying_so(tmp_path):
    text = '''
        from torch.utils.cpp_extension import load_inline
        def build(tile):
            return load_inline(name="x", cpp_sources="", cuda_sources=[f"#define T {tile}\\n__global__ void k() {{}}"])
    '''
    with pytest.raises(arena_compile.CompileError, match=r"calls load_inline \(line 4\) with cuda_sources made at run time"):
        arena_compile.find_sources(write(tmp_path, text))


def test_sources_built_in_a_loop_over_constants_are_found_one_each(tmp_path):
    # `for i, src in enumerate([V4, V3]): load_inline(cuda_sources=COMMON + src)`: each variant needs COMMON.
    text = '''
        from torch.utils.cpp_extension import load_inline
        COMMON = "constexpr int WIDTH = 32;\\n"
        V4 = "__global__ void k4(int* x) { x[threadIdx.x] = WIDTH * 4; }"
        V3 = "__global__ void k3(int* x) { x[threadIdx.x] = WIDTH * 3; }"
        for i, src in enumerate([V4, V3]):
            load_inline(f"variant{i}", cpp_sources="", cuda_sources=COMMON + src, no_implicit_headers=True)
    '''
    sources = arena_compile.find_sources(write(tmp_path, text))
    assert [s.name for s in sources] == ["COMMON+V4", "COMMON+V3"]
    assert all(s.text.startswith("constexpr int WIDTH = 32;") for s in sources)   # neither is built bare


def test_a_flag_list_with_a_run_time_item_keeps_its_constant_flags(tmp_path):
    text = '''
        import os
        from torch.utils.cpp_extension import load_inline
        SRC = "__global__ void k() {}"
        def build():
            cutlass = os.environ.get("CUTLASS_PATH", "/usr/local/cutlass")
            flags = ["-O3", "--expt-extended-lambda", f"-I{cutlass}/include", "-gencode=arch=compute_100a,code=sm_100a"]
            return load_inline("ext", "", cuda_sources=SRC, extra_cuda_cflags=flags)
    '''
    (source,) = arena_compile.find_sources(write(tmp_path, text))
    assert source.flags == ["-O3", "--expt-extended-lambda"] and source.targets == ["sm_100a"]


# ---- real builds ------------------------------------------------------------------------------------

@needs_nvcc
def test_own_flags_and_include_paths_are_honoured(tmp_path):
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "tile_config.h").write_text("#define TILE_SCALE 2.0f\n")
    run = compile_run(write(tmp_path, OWN_FLAGS), "--expect", "none")
    assert run.code == 0, run.stdout + run.stderr
    assert "sm_90a: 1 built" in run.stdout and "sm_100a: 1 not targeted" in run.stdout


@needs_nvcc
def test_python_include_folder_is_on_the_path(tmp_path):
    text = '''
        from torch.utils.cpp_extension import load_inline
        SRC = """#include <Python.h>
        __global__ void k(float* x) { x[0] = (float)PY_MAJOR_VERSION; }
        """
        def m():
            return load_inline(name="py", cpp_sources="", cuda_sources=[SRC], no_implicit_headers=True)
    '''
    run = compile_run(write(tmp_path, text), "--arch", "sm_90a", "--expect", "none")
    assert run.code == 0, run.stdout + run.stderr


@needs_nvcc
def test_torch_extension_header_builds(tmp_path):
    """What most load_inline submissions include: torch's and Python's include folders are needed."""
    text = '''
        from torch.utils.cpp_extension import load_inline
        SRC = r"""
        #include <torch/extension.h>
        __global__ void twice(float* x) { x[threadIdx.x] *= 2.f; }
        torch::Tensor run(torch::Tensor x) { twice<<<1, 32>>>(x.data_ptr<float>()); return x; }
        """
        mod = load_inline(name="ext_h", cpp_sources="torch::Tensor run(torch::Tensor x);", cuda_sources=[SRC],
                          functions=["run"])
    '''
    run = compile_run(write(tmp_path, text), "--arch", "sm_90a", "--expect", "none")
    assert run.code == 0, run.stdout + run.stderr


@needs_nvcc
def test_cutlass_headers_come_from_cutlass_path(tmp_path):
    path = write(tmp_path, CUTLASS_STYLE)
    run = run_eval("compile", "--submission", path, "--expect", "none",
                   env={"CUTLASS_PATH": str(fake_cutlass(tmp_path / "cutlass"))}, timeout=600)
    assert run.code == 0, run.stdout + run.stderr
    assert "arena_probe_kernel" in run.stdout and "sm_90a: 1 built" in run.stdout


@needs_nvcc
def test_a_source_written_for_sm_100a_only_does_not_fail_the_default_run(tmp_path):
    text = '''
        from torch.utils.cpp_extension import load_inline
        BLACKWELL = r"""
        #if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM100_ALL)
        #error "this kernel is for sm_100a only"
        #endif
        __global__ void k(float* x) { x[threadIdx.x] += 1.f; }
        """
        def m():
            return load_inline(name="bw", cpp_sources="", cuda_sources=[BLACKWELL], no_implicit_headers=True,
                               extra_cuda_cflags=["-O3", "-gencode=arch=compute_100a,code=sm_100a"])
    '''
    run = compile_run(write(tmp_path, text), "--expect", "none")
    assert run.code == 0, run.stdout + run.stderr
    assert "sm_90a: 1 not targeted" in run.stdout and "sm_100a: 1 built" in run.stdout
    only_hopper = compile_run(write(tmp_path, text), "--arch", "sm_90a", "--expect", "none")
    assert only_hopper.code == 112 and "none of the sources is for sm_90a (BLACKWELL targets sm_100a)" in only_hopper.stdout


GEMV = '''
    # arena: a CUDA-core GEMV, no tensor cores
    GEMV = r"""
    __global__ void gemv(const float* a, const float* x, float* y, int k) {
      float acc = 0.f;
      for (int i = 0; i < k; ++i) acc += a[blockIdx.x * k + i] * x[i];
      y[blockIdx.x] = acc;
    }
    """
'''


@needs_nvcc
def test_the_tensor_core_rule_applies_only_where_asked(tmp_path):
    path = write(tmp_path, GEMV)
    gemv = compile_run(path, "--task", GEMV_TASK, "--arch", "sm_90a")
    assert gemv.code == 0 and "no HGMMA" not in gemv.stdout, gemv.stdout + gemv.stderr
    asked = compile_run(path, "--task", GEMV_TASK, "--arch", "sm_90a", "--expect", "mma")
    assert asked.code == 112 and "GEMV (sm_90a): no HGMMA (wgmma) instruction in the SASS" in asked.stdout


MMA_AND_EPILOGUE = '''
    MMA = r"""
    #include <cstdint>
    __global__ void mma(float* out, uint64_t da, uint64_t db) {
      float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
      asm volatile("wgmma.fence.sync.aligned;\\n");
      asm volatile("{\\n.reg .pred p;\\nsetp.ne.b32 p, %6, 0;\\n"
                   "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0, %1, %2, %3}, %4, %5, p, 1, 1, 0, 0;\\n}\\n"
                   : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) : "l"(da), "l"(db), "r"(1));
      asm volatile("wgmma.commit_group.sync.aligned;\\n");
      asm volatile("wgmma.wait_group.sync.aligned 0;\\n" ::: "memory");
      out[threadIdx.x] = d0 + d1 + d2 + d3;
    }
    """
    EPILOGUE = r"""
    __global__ void silu_mul(const float* g, const float* u, float* c) {
      float x = g[threadIdx.x]; c[threadIdx.x] = x / (1.f + __expf(-x)) * u[threadIdx.x];
    }
    """
'''


@needs_nvcc
def test_a_cuda_core_epilogue_beside_an_mma_kernel_passes_the_rule(tmp_path):
    run = compile_run(write(tmp_path, MMA_AND_EPILOGUE), "--task", f"{ROOT}/tasks/nvfp4_dual_gemm", "--arch", "sm_90a")
    assert run.code == 0, run.stdout + run.stderr
    assert "HGMMA" in run.stdout and "sm_90a: 2 built" in run.stdout


def test_the_worker_finds_cutlass_headers_as_the_competition_image_did(monkeypatch, tmp_path):
    """A load_inline source that includes <cutlass/...> without extra_include_paths: the worker's environment
    puts the installed CUTLASS on CPATH, and nvcc then builds it (a real nvcc run when both exist)."""
    from arena.worker import spawn
    include = tmp_path / "cutlass" / "include"
    (include / "cutlass").mkdir(parents=True)
    (include / "cutlass" / "probe.h").write_text("#define ARENA_PROBE 1\n")
    monkeypatch.setattr(spawn, "cutlass_include_dirs", lambda: [str(include)])
    env = spawn.with_cutlass_headers({"CPATH": "/elsewhere", "PATH": os.environ.get("PATH", "")})
    assert env["CPATH"] == f"{include}{os.pathsep}/elsewhere" and env["CUTLASS_PATH"] == str(tmp_path / "cutlass")
    assert spawn.with_cutlass_headers({"CUTLASS_PATH": "/mine"})["CUTLASS_PATH"] == "/mine"
    nvcc = find_tool("nvcc")
    if nvcc:
        source = tmp_path / "k.cu"
        source.write_text("#include <cutlass/probe.h>\n#if ARENA_PROBE != 1\n#error no\n#endif\n"
                          "__global__ void k(int *x) { x[0] = ARENA_PROBE; }\n")
        built = subprocess.run([nvcc, "-c", str(source), "-o", str(tmp_path / "k.o")], env=env,
                               capture_output=True, text=True, timeout=300)
        assert built.returncode == 0, built.stderr
