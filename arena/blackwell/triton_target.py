"""Triton under `--emulate-blackwell`.

Triton compiles for the target its CUDA driver reports (`CudaDriver.get_current_target`,
triton/backends/nvidia/driver.py) and, for an sm_100 target, assembles with `knobs.nvidia.ptxas_blackwell`
(TRITON_PTXAS_BLACKWELL_PATH; triton/backends/nvidia/compiler.py, `make_cubin`). `install()` makes the
driver report cuda:100 and points that ptxas at the emulation's ptxas shim, which rewrites the tcgen05
instructions and assembles for sm_90a; Triton then loads the cubin as usual (cuModuleLoadData). The shim's
`ptxas --version` is the toolkit's, so Triton also writes PTX of a version that toolkit reads. Each loaded
module's error record (`__nvfp4emu_state`) is read after every call, through `knobs.runtime.kernel_load_end_hook`.
"""
from __future__ import annotations

import ctypes
import os

from arena.blackwell import import_patch

CAPABILITY = 100
_RECORD_BYTES = 64                  # words 0-15 of __nvfp4emu_state: the error record
_COUNTS_AT, _HEADER_BYTES = 72, 128  # words 18-31: the call's work counts (read, then cleared)
_state = {"installed": False, "readers": []}


def _environment() -> None:
    from arena.blackwell import toolchain
    work = toolchain.workdir()
    os.environ["TRITON_PTXAS_BLACKWELL_PATH"] = os.path.join(work, "shims", "ptxas")
    # A cache of its own, per emulation-library version: a cached cubin holds whatever rewrite made it.
    os.environ["TRITON_CACHE_DIR"] = os.path.join(work, "triton-cache")


def _libcuda():
    return ctypes.CDLL("libcuda.so.1")


def _reader(module_handle: int):
    """Reads and clears words 0-15 (the error record) and 18-31 (the call's work counts) of one loaded CUmodule's
    __nvfp4emu_state (None when it has none)."""
    cuda = _libcuda()
    pointer, size = ctypes.c_uint64(), ctypes.c_size_t()
    if cuda.cuModuleGetGlobal_v2(ctypes.byref(pointer), ctypes.byref(size), ctypes.c_void_p(module_handle),
                                 b"__nvfp4emu_state") != 0 or size.value < _HEADER_BYTES:
        return None

    def read():
        words = (ctypes.c_uint * 32)()
        if cuda.cuMemcpyDtoH_v2(words, pointer, ctypes.c_size_t(_HEADER_BYTES)) != 0:
            return None
        cuda.cuMemsetD8_v2(pointer, ctypes.c_ubyte(0), ctypes.c_size_t(_RECORD_BYTES))
        cuda.cuMemsetD8_v2(ctypes.c_uint64(pointer.value + _COUNTS_AT), ctypes.c_ubyte(0),
                           ctypes.c_size_t(_HEADER_BYTES - _COUNTS_AT))
        return list(words), {}
    return read


def _on_load(module, function, name, metadata_group, hash):
    read = _reader(int(module))
    if read:
        _state["readers"].append(read)


def _patch_driver(driver_module) -> None:
    from triton.backends.compiler import GPUTarget
    driver_module.CudaDriver.get_current_target = lambda self: GPUTarget("cuda", CAPABILITY, 32)


def _patch_knobs(knobs_module) -> None:
    hooks = knobs_module.runtime.kernel_load_end_hook
    if hasattr(hooks, "add"):
        hooks.add(_on_load)
    else:                                   # Triton before HookChain: one optional callable
        knobs_module.runtime.kernel_load_end_hook = _on_load


def install() -> None:
    """Target cuda:100 through the ptxas shim (once per process; the environment from toolchain.prepare() must
    be in os.environ)."""
    if _state["installed"]:
        return
    _environment()
    import_patch.install({"triton.backends.nvidia.driver": _patch_driver, "triton.knobs": _patch_knobs})
    _state["installed"] = True


def readers() -> list:
    """One reader per loaded Triton module: each call returns (its error record's words, the site names) and
    clears the record, or None when it cannot be read."""
    return list(_state["readers"])
