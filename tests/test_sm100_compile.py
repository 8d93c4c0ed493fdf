"""Compile checks for the sm_100a tcgen05 NVFP4 GEMM (kernels/sm100) on a machine without a GPU.

- sm_100a build (-gencode=arch=compute_100a,code=sm_100a): ptxas reports no spills / no stack frame and
  the SASS holds the block-scaled 4X MMA (UTCOMMA.4X) and the scale copies (UTCCP).
- The amalgamated source (what submission.py embeds) builds the same way.
- Emulation build (-DNVFP4_TCGEN05_EMULATION) for sm_90a: no spills, no tcgen05 instruction left.
- GPU (Hopper) test: runs bench/emulation/sm100_emulation_check.py --quick (marked gpu; skipped without a GPU).
Nothing here runs on Blackwell hardware.
"""
import os
import re
import subprocess
import sys

import pytest

from arena.compile import find_tool

pytestmark = pytest.mark.slow     # nvcc builds: `pytest -m slow`

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KDIR = os.path.join(ROOT, "kernels", "sm100")
NVCC = find_tool("nvcc")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc not found")


def _sass_tool():
    for name in ("cuobjdump", "nvdisasm"):
        path = find_tool(name)
        if path:
            return name, path
    return None, None


def _compile(src, arch, tmp, defines=(), lang=None):
    cubin = os.path.join(tmp, f"k_{arch}.cubin")
    cmd = [NVCC, f"-gencode=arch=compute_{arch},code=sm_{arch}", "-Xptxas", "-v", "-cubin", "-O3", "-std=c++17",
           "-I", KDIR, "-o", cubin, *[f"-D{d}" for d in defines]]
    if lang:
        cmd += ["-x", lang]
    res = subprocess.run(cmd + [src], capture_output=True, text=True, timeout=240)
    assert res.returncode == 0, res.stderr
    return cubin, res.stderr


def _kernel_report(ptxas_log):
    """(registers, spill stores, spill loads, stack), worst over the GEMM kernel's instantiations."""
    found = re.findall(r"Function properties for \S*nvfp4_gemm_sm100_kernel\S*\n\s*(\d+) bytes stack frame, "
                       r"(\d+) bytes spill stores, (\d+) bytes spill loads\n.*?Used (\d+) registers", ptxas_log)
    assert len(found) >= 1, ptxas_log
    stack, st, ld, regs = (max(int(f[i]) for f in found) for i in range(4))
    return regs, st, ld, stack


def _sass(cubin):
    name, tool = _sass_tool()
    if tool is None:
        pytest.skip("no cuobjdump/nvdisasm (pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)")
    args = [tool, "-sass", cubin] if name == "cuobjdump" else [tool, cubin]
    res = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return res.stdout


@pytest.fixture(scope="module")
def sm100_build(tmp_path_factory):
    if NVCC is None:
        pytest.skip("nvcc not found")
    return _compile(os.path.join(KDIR, "nvfp4_gemm_sm100.cu"), "100a", str(tmp_path_factory.mktemp("sm100")))


@needs_nvcc
def test_sm100a_no_spills(sm100_build):
    regs, st, ld, stack = _kernel_report(sm100_build[1])
    assert (st, ld, stack) == (0, 0, 0)
    assert regs <= 255


@needs_nvcc
def test_sm100a_sass_has_block_scaled_mma(sm100_build):
    sass = _sass(sm100_build[0])
    assert len(re.findall(r"UTCOMMA\.4X", sass)) >= 1, "no block-scaled 4X UMMA in SASS"
    assert len(re.findall(r"UTCCP", sass)) >= 1, "no tcgen05.cp in SASS"


@needs_nvcc
def test_amalgamated_source_builds_for_sm100a(tmp_path):
    sys.path.insert(0, KDIR)
    from amalgamate import amalgamated_source
    src = tmp_path / "amalgamated.cu"
    src.write_text(amalgamated_source())
    _, log = _compile(str(src), "100a", str(tmp_path))
    assert _kernel_report(log)[1:] == (0, 0, 0)


@needs_nvcc
def test_emulation_build_sm90a(tmp_path):
    cubin, log = _compile(os.path.join(KDIR, "nvfp4_gemm_sm100.cu"), "90a", str(tmp_path),
                          defines=("NVFP4_TCGEN05_EMULATION",))
    assert _kernel_report(log)[1:] == (0, 0, 0)
    name, tool = _sass_tool()
    if tool:
        assert "UTCOMMA" not in _sass(cubin)


@pytest.mark.gpu
def test_emulation_runs_on_hopper():
    import torch
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("the emulation build targets sm_90a")
    res = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "emulation", "sm100_emulation_check.py"), "--quick"],
                         capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]


def test_submission_sm100_region_in_sync():
    """submission.py carries kernels/sm100 verbatim (CUDA_SM100 + the glue); no forbidden word."""
    sys.path.insert(0, KDIR)
    import integrate
    path = os.path.join(ROOT, "submission.py")
    if not os.path.exists(path) or integrate.BEGIN not in open(path).read():
        pytest.skip("submission.py has no sm100 region yet")
    current = open(path).read()
    assert integrate.patched(current) == current, "run: python kernels/generate.py"
    assert "stream" not in current.lower()
