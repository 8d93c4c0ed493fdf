"""Plain one-line causes for a submission that cannot run here: a missing CuTe DSL, no CUDA GPU, a GPU that is
not a Blackwell, a kernel built for another architecture. The worker shows these instead of raw torch text
("Torch not compiled with CUDA enabled", "CUDA_HOME environment variable is not set", ...)."""
from __future__ import annotations

import re

CUTE_DSL_PIN = "4.3.5"       # requirements-cute.txt: the competition's B200 runner image (gpu-mode/kernelbot)
CUTE_DSL_INSTALL = "python3 -m pip install -r requirements-cute.txt"
_DSL_MODULES = ("cutlass", "cute", "cuda")      # CuTe DSL and the cuda-python it brings (cuda.bindings)

# Errors that only mean "there is no usable CUDA GPU here" (CPU-only torch, no driver, no device).
_NO_CUDA = re.compile(r"Torch not compiled with CUDA enabled|CUDA_HOME environment variable is not set|"
                      r"Found no NVIDIA driver|No CUDA GPUs are available|no CUDA-capable device|"
                      r"CUDA driver initialization failed|libcuda\.so|cuInit|"
                      r"Attempting to deserialize object on a CUDA device", re.I)
_NO_IMAGE = re.compile(r"no kernel image is available|CUDA_ERROR_NO_BINARY_FOR_GPU|invalid device function", re.I)
# Blackwell-only features used on an older GPU: tcgen05 / sm_100 code, NVFP4 _scaled_mm in cuBLAS.
_NEEDS_BLACKWELL = re.compile(r"tcgen05|sm_?100|sm_?10[0-3]a|Blackwell|CUBLAS_STATUS_NOT_SUPPORTED|"
                              r"float4_e2m1fn_x2.*not (supported|implemented)", re.I)


def _arch(capability: tuple) -> str:
    return f"sm_{capability[0]}{capability[1]}"


def installed_dsl_version() -> str | None:
    """The version of the installed nvidia-cutlass-dsl distribution, None without one."""
    try:
        from importlib.metadata import version
        return version("nvidia-cutlass-dsl")
    except Exception:
        return None


def _emulation_line(exc: BaseException) -> str | None:
    """The `emulate-blackwell: ...` line in `exc` or the exceptions it wraps (CuTe DSL wraps a failed compile in
    its own "ICE" error): what stops the emulation, which says more than the architecture it would need."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        match = re.search(r"emulate-blackwell:[^\n]*", str(exc))
        if match:
            return match.group(0).strip()
        exc = exc.__cause__ or exc.__context__ or getattr(exc, "cause", None)
    return None


def explain_import_error(exc: BaseException, device_capability: tuple | None,
                         built_for: list[str] | None = None) -> str | None:
    """One plain line for why `exc` happened here, or None when it is not one of these causes.

    device_capability: the GPU's (major, minor), None on a machine without a CUDA GPU. built_for: the archs
    the submission's CUDA code was compiled for, when known (arena/compile/), to name them."""
    text = f"{type(exc).__name__}: {exc}"
    emulation = _emulation_line(exc)
    if emulation:
        return emulation
    if isinstance(exc, ModuleNotFoundError) and (exc.name or "").split(".")[0] in _DSL_MODULES:
        return (f"needs CuTe DSL (nvidia-cutlass-dsl), which is not installed (no module {exc.name!r}): "
                f"{CUTE_DSL_INSTALL}")
    if isinstance(exc, (ImportError, AttributeError)) and re.search(r"\bcutlass\b|\bcute\b", text):
        installed = installed_dsl_version()
        if installed and installed != CUTE_DSL_PIN:
            return (f"CuTe DSL {installed} lacks a name this code uses ({exc}); the competition ran "
                    f"{CUTE_DSL_PIN}: {CUTE_DSL_INSTALL}")
    if device_capability is None:
        if _NO_CUDA.search(text) or _NO_IMAGE.search(text) or re.search(r"\bcuda\b", text, re.I):
            return "needs a CUDA GPU (this machine has none)"
        return None
    here = _arch(device_capability)
    if _NO_IMAGE.search(text):
        if built_for:
            return f"no kernel image for this GPU: built for {', '.join(built_for)}, this is {here}"
        return f"no kernel image for this GPU ({here}): its CUDA code was built for another architecture"
    if device_capability[0] < 10 and _NEEDS_BLACKWELL.search(text):
        return f"needs a Blackwell GPU (sm_100a), this is {here}"
    return None
