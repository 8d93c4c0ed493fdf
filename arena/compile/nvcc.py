"""The tools and the nvcc command line of `eval.py compile`: where nvcc and cuobjdump are, which folders a source
needs (torch's, Python's, CUTLASS's headers) and the flags torch's load_inline would give it. Used by build.py;
find_tool is the project's one CUDA tool finder (tests and bench use it), and cutlass_include_dirs also serves
arena/worker/spawn.py (the worker's own load_inline builds).
"""
from __future__ import annotations

import glob
import importlib.util
import os
import re
import shutil
import sys
import sysconfig

from arena.compile.archs import ARCH_FLAGS, EMULATED
from arena.compile.sources import CUTLASS_INCLUDE, CompileError, Source

CUTLASS_INSTALL = "python3 -m pip install --no-deps nvidia-cutlass==4.2.0.0"
# load_inline's nvcc flags (torch/utils/cpp_extension.py); its implicit headers are in sources.py.
TORCH_NVCC_FLAGS = ["-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
                    "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__", "--expt-relaxed-constexpr"]

_TORCH_INCLUDE = re.compile(r'#\s*include\s*[<"](torch|ATen|c10|pybind11)/|#\s*include\s*[<"]Python\.h', re.M)


def find_tool(name: str) -> str | None:
    """A CUDA tool (nvcc, cuobjdump, nvdisasm, ...): on PATH, in $CUDA_HOME or /usr/local/cuda, or the copy a
    PyPI nvidia-cuda-* package installs. The one finder of the project (tests and bench use it too)."""
    found = shutil.which(name)
    if found:
        return found
    homes = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    candidates = [os.path.join(home, "bin", name) for home in homes if home]
    for root in sys.path:
        candidates += sorted(glob.glob(os.path.join(root, "nvidia", "*", "bin", name)))
    return next((c for c in candidates if os.path.isfile(c) and os.access(c, os.X_OK)), None)


def cutlass_include_dirs() -> list[str] | None:
    """CUTLASS's include folders: $CUTLASS_PATH (a CUTLASS checkout), else the nvidia-cutlass package's copy."""
    root = os.environ.get("CUTLASS_PATH")
    if not root:
        spec = importlib.util.find_spec("cutlass_library")
        if spec is None or not spec.submodule_search_locations:
            return None
        root = os.path.join(list(spec.submodule_search_locations)[0], "source")
    found = [d for d in (os.path.join(root, "include"), os.path.join(root, "tools", "util", "include"))
             if os.path.isdir(d)]
    return found or None


def system_includes(source: Source) -> list[str] | str:
    """-isystem folders the source needs (torch, Python, CUTLASS), or a one-line reason it cannot build."""
    folders = []
    if source.extension or _TORCH_INCLUDE.search(source.text):
        try:
            from torch.utils.cpp_extension import include_paths
            folders += include_paths()
        except Exception:               # torch missing: let nvcc name the header it cannot find
            pass
        python = sysconfig.get_path("include", scheme="posix_prefix")
        if python:
            folders.append(python)
    if CUTLASS_INCLUDE.search(source.text):
        cutlass = cutlass_include_dirs()
        if cutlass is None:
            return f"includes CUTLASS headers, which are not installed: {CUTLASS_INSTALL} (or set CUTLASS_PATH)"
        folders += cutlass
    return [flag for folder in folders for flag in ("-isystem", folder)]


def nvcc_command(nvcc: str, source: Source, arch: str, path: str, cubin: str, system: list[str]) -> list[str]:
    """nvcc building `path` into `cubin` for `arch` as load_inline would (torch's defines for an extension),
    at -O3 and C++17 unless the source's own flags set those."""
    command = [nvcc, ARCH_FLAGS[arch], "-cubin", "-Xptxas", "-v", "-lineinfo"]
    if source.extension:
        command += [f"-DTORCH_EXTENSION_NAME={source.extension}", "-DTORCH_API_INCLUDE_EXTENSION_H",
                    *TORCH_NVCC_FLAGS]
    own = list(source.flags)
    if not any(flag.startswith("-O") for flag in own):
        command.append("-O3")
    if not any(flag.startswith(("-std", "--std")) for flag in own):
        command.append("-std=c++17")
    command += [f"-I{p}" for p in source.includes] + system + own
    return command + ["-o", cubin, path]


def _emulation_toolchain() -> tuple[str, dict]:
    """The nvcc (and environment) that builds sm_100a code into an sm_90a image whose tcgen05 is software."""
    from arena.blackwell.toolchain import ToolchainError, prepare
    try:
        env = prepare()
    except ToolchainError as error:
        raise CompileError(f"emulate-blackwell: {error}") from None
    return env["PYTORCH_NVCC"], {**os.environ, **env}


def compiler(arch: str) -> tuple[str, dict | None]:
    """The nvcc that builds for `arch` and the environment it needs (None: the evaluator's): for EMULATED,
    --emulate-blackwell's toolchain."""
    if arch == EMULATED:
        return _emulation_toolchain()
    nvcc = find_tool("nvcc")
    if nvcc is None:
        raise CompileError("nvcc not found on PATH: install the CUDA toolkit to use `eval.py compile`")
    return nvcc, None


def disassembler(arch: str) -> str | None:
    """cuobjdump, which shows a build's SASS; None for an EMULATED build, whose tcgen05 became library calls
    (no tensor-core instruction to count)."""
    if arch == EMULATED:
        return None
    cuobjdump = find_tool("cuobjdump")
    if cuobjdump is None:
        raise CompileError("cuobjdump not found: `pip install nvidia-cuda-cuobjdump` (or use the CUDA toolkit's)")
    return cuobjdump
