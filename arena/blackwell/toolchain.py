"""The build side of `--emulate-blackwell`: a private folder that puts arena/blackwell/shims.py in front of
nvcc, ptxas and fatbinary, and the emulation library compiled to PTX for sm_90a.

`prepare()` makes the folder (once per library version) and returns the environment a process needs so that
torch.utils.cpp_extension (load_inline / load, through ninja) builds every CUDA source the emulated way.
"""
from __future__ import annotations

import fcntl
import glob
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
LIBRARY_SOURCE = os.path.join(HERE, "tcgen05_library.cu")
HOST_HEADER = os.path.join(HERE, "emulation_host.h")
CUBLASLT_HEADER = os.path.join(HERE, "emulation_cublaslt.h")     # for sources that name cuBLASLt (shims.nvcc)
FP4_DOT_HEADER = os.path.join(HERE, "emulation_fp4_dot.h")       # its arithmetic, which a host build checks
WORKDIR_ENV = "NVFP4EMU_WORKDIR"
CUDA_ENV = "NVFP4EMU_CUDA_HOME"
SITES_ENV = "NVFP4EMU_SITES"
LINK_ENV = "NVFP4EMU_LINK"         # set by the nvcc shim: its modules are linked with the library's cubin

_PROFILE = """TOP              = {cuda}
CICC_PATH        = $(TOP)/nvvm/bin
NVVMIR_LIBRARY_DIR = $(TOP)/nvvm/libdevice
LD_LIBRARY_PATH += $(TOP)/lib:
PATH            += {shims}:$(CICC_PATH):$(TOP)/bin:
INCLUDES        +=  "-I$(TOP)/$(_TARGET_DIR_)/include" $(_SPACE_)
SYSTEM_INCLUDES +=  "-isystem" "$(TOP)/$(_TARGET_DIR_)/include/cccl" $(_SPACE_)
LIBRARIES        =+ $(_SPACE_) "-L$(TOP)/$(_TARGET_DIR_)/lib$(_TARGET_SIZE_)/stubs" "-L$(TOP)/$(_TARGET_DIR_)/lib$(_TARGET_SIZE_)"
CUDAFE_FLAGS    +=
PTXAS_FLAGS     +=
"""


class ToolchainError(RuntimeError):
    """One line: why the emulated build cannot be set up here."""


def _is_cuda_home(path: str | None) -> bool:
    """A CUDA toolkit root: its bin/ holds the real nvcc (with the nvcc.profile it reads) and ptxas."""
    return bool(path) and all(os.path.exists(os.path.join(path, "bin", x)) for x in ("nvcc.profile", "ptxas"))


def cuda_home() -> str:
    candidates = [os.environ.get(CUDA_ENV), os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"),
                  "/usr/local/cuda"]
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates.append(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))))
    candidates += sorted(glob.glob("/usr/local/cuda-*"), reverse=True)
    for candidate in candidates:
        if _is_cuda_home(candidate):
            return candidate
    raise ToolchainError("--emulate-blackwell needs the CUDA toolkit (nvcc, ptxas; 12.8 or newer): none found "
                         "(set CUDA_HOME)")


def real_tool(name: str) -> str:
    return os.path.join(cuda_home(), "bin", name)


def workdir() -> str:
    return os.environ[WORKDIR_ENV]


def private_nvcc(work: str) -> str:
    return os.path.join(work, "real", "nvcc")


def host_header() -> str:
    return HOST_HEADER


def library_version() -> str:
    digest = hashlib.sha256()
    for path in (LIBRARY_SOURCE, HOST_HEADER, CUBLASLT_HEADER, FP4_DOT_HEADER, *(os.path.join(HERE, name) for name in (
            "ptx_rewrite.py", "ptx_text.py", "ptx_sm100.py", "shims.py"))):
        with open(path, "rb") as f:
            digest.update(f.read())
    digest.update(cuda_home().encode())
    # The folder's scripts name this interpreter and this checkout's shims.py: another checkout or Python (a
    # fresh clone beside an older one) gets a folder of its own, never scripts pointing into the other
    digest.update(f"\0{sys.executable}\0{HERE}".encode())
    return digest.hexdigest()[:16]


def library_ptx() -> str:
    with open(os.path.join(workdir(), "library.ptx")) as f:
        return f.read()


def _first_error(stderr: str) -> str:
    return next((x for x in stderr.splitlines() if "error" in x), stderr.strip()[:200])


def _assemble_library(work: str, cap: int, into: str) -> None:
    partial = f"{into}.{os.getpid()}.tmp"
    built = subprocess.run([real_tool("ptxas"), "-arch=sm_90a", "-c", "-O3", f"-maxrregcount={cap}",
                            os.path.join(work, "library.ptx"), "-o", partial], capture_output=True, text=True)
    if built.returncode != 0:
        raise ToolchainError(f"the tcgen05 emulation library did not assemble (at most {cap} registers): "
                             f"{_first_error(built.stderr)}")
    os.replace(partial, into)


def library_cubin(cap: int) -> str:
    """The library assembled once for sm_90a as a relocatable cubin whose functions use at most `cap` registers
    (ptx_rewrite.register_cap), for nvlink. Built on first use under a lock; where the emulation folder is
    read-only, into a private temporary folder."""
    work = workdir()
    path = os.path.join(work, f"library.r{cap}.cubin")
    if os.path.exists(path):
        return path
    try:
        with open(path + ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not os.path.exists(path):
                _assemble_library(work, cap, path)
        return path
    except OSError:         # a read-only folder (EROFS, EACCES)
        private = os.path.join(tempfile.mkdtemp(prefix="nvfp4emu-"), os.path.basename(path))
        _assemble_library(work, cap, private)
        return private


def _write(path: str, text: str, mode: int | None = None):
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
    if mode is not None:
        os.chmod(tmp, mode)
    os.replace(tmp, path)


def prepare(base: str | None = None) -> dict[str, str]:
    """Make (or reuse) the emulation folder under `base` (default: the user's cache) and return the
    environment variables that route CUDA builds through it."""
    cuda = cuda_home()
    base = base or os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                                "nvfp4-arena", "blackwell-emulation")
    work = os.path.join(base, library_version())
    if not os.path.exists(os.path.join(work, "ready")):
        os.makedirs(base, exist_ok=True)
        # Evaluations started together (a batch on a fresh machine) share this folder: one builds it while the
        # others wait, and nobody reads a library.ptx another is still writing.
        with open(work + ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not os.path.exists(os.path.join(work, "ready")):
                _build_folder(work, cuda)
    return {WORKDIR_ENV: work, CUDA_ENV: cuda, "PYTORCH_NVCC": os.path.join(work, "bin", "nvcc"),
            "TORCH_EXTENSIONS_DIR": os.path.join(work, "extensions")}


def _build_folder(work: str, cuda: str) -> None:
    for sub in ("real", "shims", "bin", "extensions"):
        os.makedirs(os.path.join(work, sub), exist_ok=True)
    link = private_nvcc(work)
    if os.path.lexists(link):
        os.remove(link)
    os.symlink(os.path.join(cuda, "bin", "nvcc"), link)     # nvcc finds its profile beside argv[0]
    _write(os.path.join(work, "real", "nvcc.profile"), _PROFILE.format(cuda=cuda, shims=os.path.join(work, "shims")))
    shims = os.path.join(HERE, "shims.py")
    for tool, folder in (("ptxas", "shims"), ("fatbinary", "shims"), ("nvcc", "bin")):
        _write(os.path.join(work, folder, tool), f'#!/bin/sh\nexec "{sys.executable}" "{shims}" {tool} "$@"\n', 0o755)
    partial = os.path.join(work, f"library.{os.getpid()}.ptx")
    built = subprocess.run([os.path.join(cuda, "bin", "nvcc"), "-arch=sm_90a", "-rdc=true", "-ptx", "-O3",
                            LIBRARY_SOURCE, "-o", partial], capture_output=True, text=True)
    if built.returncode != 0:
        raise ToolchainError(f"the tcgen05 emulation library did not build: {_first_error(built.stderr)}")
    os.replace(partial, os.path.join(work, "library.ptx"))
    _assemble_library(work, 255, os.path.join(work, "library.r255.cubin"))      # the cap most kernels need
    _write(os.path.join(work, "ready"), "")
