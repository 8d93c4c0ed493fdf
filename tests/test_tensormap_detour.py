"""emulation_host.h's tensor-map detour, on the CPU: packed-FP4 maps (16U4_ALIGN8B) cannot be encoded on a Hopper
GPU, so every way a submission reaches cuTensorMapEncodeTiled must land on the detour, which encodes the same bytes
as UINT8 with dim0 and box0 halved. tests/blackwell/tensormap_detour.cpp is built with the host compiler against a
stand-in CUDA runtime whose driver knows only the name "cuTensorMapEncodeTiled", as the real one does.

CUTLASS 4.x finds the encoder by a name it stringifies after macro expansion; under the detour's #define that name
is "__nvfp4emu_encode_tiled", which the driver does not know: CUTLASS then printed "TMA Desc Addr:" and went on with
an empty descriptor (our CUTLASS submission died with SIGSEGV on an H200 in every case)."""
import os
import shutil
import subprocess

import pytest

from arena.blackwell import toolchain
from arena.compile import cutlass_include_dirs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE = os.path.join(ROOT, "tests", "blackwell", "tensormap_detour.cpp")
UINT8, FLOAT16 = 0, 6                              # CUtensorMapDataType codes (cuda.h)
DETOURED = {"rc": "0", "type": str(UINT8), "dim0": "128", "box0": "64"}


def run_detour(tmp_path, extra: list[str]) -> dict[str, dict[str, str]]:
    compiler = shutil.which("g++")
    if compiler is None:
        pytest.skip("g++ not found")
    try:
        include = os.path.join(toolchain.cuda_home(), "include")
    except toolchain.ToolchainError:
        pytest.skip("no CUDA toolkit (cuda.h)")
    exe = str(tmp_path / "detour")
    subprocess.run([compiler, "-std=c++17", "-w", *extra, "-I", include, "-include", toolchain.host_header(),
                    SOURCE, "-o", exe], check=True, capture_output=True, text=True, timeout=300)
    out = subprocess.run([exe], capture_output=True, text=True, timeout=60, check=True).stdout
    return {line.split()[0]: dict(field.split("=") for field in line.split()[1:]) for line in out.splitlines()}


def test_every_lookup_of_the_encoder_lands_on_the_detour(tmp_path):
    got = run_detour(tmp_path, [])
    assert got["direct"] == got["entry_point"] == got["cutlass_wrapper"] == DETOURED


def test_cutlass_headers_lookup_lands_on_the_detour(tmp_path):
    dirs = cutlass_include_dirs()
    if not dirs:
        pytest.skip("CUTLASS headers not installed (nvidia-cutlass or CUTLASS_PATH)")
    # cutlass/cuda_host_adapter.hpp declares its driver wrappers only under nvcc's version macro
    got = run_detour(tmp_path, ["-DWITH_CUTLASS", "-D__CUDACC_VER_MAJOR__=13", *[f"-I{d}" for d in dirs]])
    assert got["cutlass_wrapper"] == DETOURED
    assert got["cutlass_wrapper_f16"] == {"rc": "0", "type": str(FLOAT16), "dim0": "256", "box0": "128"}
