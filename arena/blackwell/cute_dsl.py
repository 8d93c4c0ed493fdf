"""CuTe DSL (`import cutlass`, nvidia-cutlass-dsl) under `--emulate-blackwell`.

The DSL compiles in-process: its `cute-to-nvvm` pass pipeline (cutlass/base_dsl/compiler.py, `Compiler.compile`)
lowers the kernel to PTX for `cubin-chip` (CUTE_DSL_ARCH), assembles it with a linked-in ptxas
(libnvptxcompiler) and embeds the result as the `kernels_binary` global of the host module (a fatbinary). The
host code, JIT-compiled by MLIR's ExecutionEngine, hands that global to cudaLibraryLoadData
(`CudaDialectJitCompiledFunction._load_cuda_library`, cutlass/cutlass_dsl/cuda_jit_executor.py).

`install()` makes the DSL target sm_100a on the Hopper GPU and, when `cutlass.base_dsl.compiler` is imported,
wraps `Compiler.compile`: the pipeline also dumps its PTX, which goes through the ptxas shim (tcgen05 rewritten,
assembled for sm_90a), and the sm_90a cubin replaces the embedded binary before the JIT sees the module. Each
loaded library's error record (`__nvfp4emu_state`) is read after every call, as for CUDA extensions. A kernel
called through TVM FFI (`--enable-tvm-ffi`) loads its library from the JIT's own code and keeps the handle in a
private global: the compiled module gets a function that returns that global's address, and after the first call
the handle there is read.
"""
from __future__ import annotations

import atexit
import collections
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile

from arena.blackwell import import_patch

ARCH = "sm_100a"
COMPILER_MODULE = "cutlass.base_dsl.compiler"
EXECUTOR_MODULE = "cutlass.cutlass_dsl.cuda_jit_executor"
TVM_FFI_MODULE = "cutlass.cutlass_dsl.tvm_ffi_provider"
JIT_EXECUTOR_MODULE = "cutlass.base_dsl.jit_executor"
RUNTIME_MODULE = "cutlass.cute.runtime"
# Under --enable-tvm-ffi the host code loads the library itself on its first call and keeps the handle in a private
# global of the module (cutlass/cutlass_dsl/tvm_ffi_provider.py, `cuda_global_state_symbol`).
_TVM_FFI_STATE = re.compile(r"^__\w+_cuda_state$")
# The JIT's raw_lookup(name) finds `_mlir_<name>` only (no data symbol): a function of that name returns the
# global's address.
_STATE_ACCESSOR = "nvfp4emu_library_state_{}"
_BINARY_MAGIC = (b"\x50\xed\x55\xba", b"\x7fELF")      # fatbinary, cubin
_RECORD_BYTES = 64                                      # words 0-15 of __nvfp4emu_state: the error record
_COUNTS_AT, _HEADER_BYTES = 72, 128                     # words 18-31: the call's work counts (read, then cleared)
# "made": the argument objects made since the last direct call (the newest 256), held to be recognised by identity
_state = {"installed": False, "readers": [], "calls": 0, "arguments": 0, "made": collections.deque(maxlen=256)}
# sm_90a cubin and sites by the sha256 of the PTX, the newest few: the same PTX assembles to the same cubin, and
# an autotuner that asks cutlass.utils.HardwareInfo for every configuration compiles one empty kernel each time
# (a cubin with the library linked in can take megabytes: the memo keeps few)
_ASSEMBLED: collections.OrderedDict[str, tuple[bytes, dict[int, str]]] = collections.OrderedDict()
_ASSEMBLED_KEPT = 16


class CuteDslEmulationError(RuntimeError):
    """One line: why a CuTe DSL kernel could not be built for the emulation."""


def _environment() -> None:
    # The DSL reads these when it is imported: the target, and an empty private on-disk cache that it does not
    # write (a cached module holds whatever binary an earlier run embedded, emulated or not).
    os.environ["CUTE_DSL_ARCH"] = ARCH
    os.environ["CUTE_DSL_DISABLE_FILE_CACHING"] = "1"
    cache = tempfile.mkdtemp(prefix="cute-dsl-cache-")
    atexit.register(shutil.rmtree, cache, True)
    os.environ["CUTE_DSL_CACHE_DIR"] = cache


def with_ptx_dump(pipeline: str, base: str) -> str:
    """The pipeline with its PTX written to `base`.<chip>.ptx (any dump path the user asked for is replaced)."""
    pipeline = re.sub(r"\s*dump-ptx-path=('[^']*'|\S+)", "", pipeline)
    at = pipeline.rfind("}")
    if "cute-to-nvvm{" not in pipeline or at < 0:
        raise CuteDslEmulationError(f"unexpected CuTe DSL pipeline (no cute-to-nvvm{{...}}): {pipeline[:200]}")
    return f"{pipeline[:at].rstrip()} dump-ptx-path='{base}'{pipeline[at:]}"


def kept_cubins(pipeline: str) -> list[str]:
    """The cubin files the pipeline's `dump-cubin-path` (`--keep-cubin`) wrote: `<path>.<chip>.cubin`. The DSL
    reads one back as `compiled.artifacts.CUBIN`, and `cutlass.utils.HardwareInfo` loads that with
    cuLibraryLoadData to ask the occupancy of a persistent kernel's clusters: the sm_100a one fails on a Hopper
    GPU with CUDA_ERROR_INVALID_HANDLE, so it must be the emulation's sm_90a cubin too."""
    found = re.search(r"dump-cubin-path=(?:'([^']*)'|(\S+))", pipeline)
    if not found:
        return []
    base = found.group(1) or found.group(2)
    return sorted(glob.glob(glob.escape(base) + "*.cubin"))


def assemble_for_sm90a(ptx_path: str) -> tuple[bytes, dict[int, str]]:
    """The ptxas shim on one sm_100a PTX file: the sm_90a cubin and the rewritten instructions by site number."""
    from arena.blackwell import toolchain
    with open(ptx_path, "rb") as f:
        text = f.read()
    if text.endswith(b"\0"):        # the DSL's dump ends with the C string's NUL, which ptxas reads as text
        text = text.rstrip(b"\0")
        with open(ptx_path, "wb") as f:
            f.write(text)
    digest = hashlib.sha256(text).hexdigest()
    if digest in _ASSEMBLED:
        _ASSEMBLED.move_to_end(digest)
        return _ASSEMBLED[digest]
    cubin = ptx_path + ".sm90a.cubin"
    sites_file = cubin + ".emu.json"
    # linked with the library's cubin (assembled once per register cap): about 1 s a kernel where the merged build
    # reassembles the library each time (30-40 s on one core)
    env = dict(os.environ, **{toolchain.SITES_ENV: sites_file, toolchain.LINK_ENV: "1"})
    shim = os.path.join(toolchain.workdir(), "shims", "ptxas")
    done = subprocess.run([shim, f"-arch={ARCH}", ptx_path, "-o", cubin], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        line = next((x for x in lines if "emulate-blackwell:" in x), lines[-1] if lines else "ptxas failed")
        raise CuteDslEmulationError(line[line.find("emulate-blackwell:"):] if "emulate-blackwell:" in line else line)
    sites = {}
    if os.path.exists(sites_file):
        with open(sites_file) as f:
            sites = {int(r["site"]): str(r["instruction"]) for r in json.load(f)}
    with open(cubin, "rb") as f:
        _ASSEMBLED[digest] = (f.read(), sites)
    while len(_ASSEMBLED) > _ASSEMBLED_KEPT:
        _ASSEMBLED.popitem(last=False)
    return _ASSEMBLED[digest]


def replace_binary(module, cubin: bytes) -> int:
    """Put `cubin` in place of every embedded GPU binary global of the compiled host module; how many."""
    from cutlass._mlir import ir
    replaced = 0
    with module.context:
        for op in module.body.operations:
            o = op.operation
            if o.name != "llvm.mlir.global" or "value" not in o.attributes:
                continue
            try:
                blob = ir.StringAttr(o.attributes["value"]).value_bytes
            except ValueError:
                continue
            if blob[:4] not in _BINARY_MAGIC:
                continue
            o.attributes["value"] = ir.StringAttr.get(cubin)
            o.attributes["global_type"] = ir.TypeAttr.get(ir.Type.parse(f"!llvm.array<{len(cubin)} x i8>"))
            replaced += 1
    return replaced


_SITES: dict[int, tuple[object, dict[int, str]]] = {}     # id(compiled module) -> (module, its sites)


def _wrap_compile(compiler_module) -> None:
    original = compiler_module.Compiler.compile

    def compile(self, module, pipeline, *args, **kwargs):
        if f"cubin-chip={ARCH}" not in pipeline:      # the pipeline names its target; others pass through
            return original(self, module, pipeline, *args, **kwargs)
        with tempfile.TemporaryDirectory(prefix="cute-dsl-emu-") as folder:
            original(self, module, with_ptx_dump(pipeline, os.path.join(folder, "kernel")), *args, **kwargs)
            ptx = sorted(glob.glob(os.path.join(folder, "kernel*.ptx")))
            if len(ptx) != 1:
                raise CuteDslEmulationError(f"the CuTe DSL wrote {len(ptx)} PTX files; expected one")
            cubin, sites = assemble_for_sm90a(ptx[0])
        for kept in kept_cubins(pipeline):
            with open(kept, "wb") as f:       # --keep-cubin's artifact: what the DSL hands to cuLibraryLoadData
                f.write(cubin)
        if replace_binary(module, cubin) != 1:
            raise CuteDslEmulationError("the compiled CuTe DSL module holds no single embedded GPU binary to replace")
        _SITES[id(module)] = (module, sites)    # the compiled function keeps this module as its ir_module
        add_library_state_accessors(module)

    compile.__doc__ = original.__doc__
    compiler_module.Compiler.compile = compile


def library_state_symbols(module) -> list[str]:
    """The TVM FFI host code's globals that keep its loaded library (none in a module compiled without it)."""
    from cutlass._mlir import ir
    found = []
    with module.context:
        for op in module.body.operations:
            o = op.operation
            if o.name == "llvm.mlir.global" and "sym_name" in o.attributes:
                name = ir.StringAttr(o.attributes["sym_name"]).value
                if _TVM_FFI_STATE.match(name):
                    found.append(name)
    return found


def add_library_state_accessors(module) -> int:
    """`_mlir_nvfp4emu_library_state_<i>() -> !llvm.ptr` beside each such global: its address, for the JIT's lookup.
    How many were added; any failure adds none and leaves the module as it was (its kernels then run unread)."""
    from cutlass._mlir import ir
    added = []
    try:
        with module.context, ir.Location.unknown():
            for i, symbol in enumerate(library_state_symbols(module)):
                # parsed beside a stand-in of the global (an op alone cannot name a symbol), then moved over
                scratch = ir.Module.parse(
                    f"llvm.mlir.global private @{symbol}(0 : i64) : i64\n"
                    f"llvm.func @_mlir_{_STATE_ACCESSOR.format(i)}() -> !llvm.ptr {{\n"
                    f"  %0 = llvm.mlir.addressof @{symbol} : !llvm.ptr\n  llvm.return %0 : !llvm.ptr\n}}")
                accessor = list(scratch.body.operations)[1]
                module.body.append(accessor)
                added.append(accessor)
            module.operation.verify()
    except Exception:       # the MLIR bindings raise on text that does not parse or an op that does not verify
        for accessor in added:
            accessor.erase()
        return 0
    return len(added)


def _tvm_ffi_reader(engine, index: int, sites: dict[int, str]):
    """A reader for the library a TVM FFI function loads on its first call: None until the handle is there."""
    import ctypes
    from cuda.bindings import runtime as cudart
    accessor = engine.raw_lookup(_STATE_ACCESSOR.format(index))
    address = ctypes.CFUNCTYPE(ctypes.c_void_p)(accessor)() if accessor else None
    found = {}

    def read():
        if "read" not in found:
            handle = ctypes.c_uint64.from_address(address).value if address else 0
            if not handle:
                return None
            found["read"] = _reader(cudart.cudaLibrary_t(handle), sites)
        return found["read"]() if found["read"] else None
    return read


def _wrap_tvm_ffi(provider_module) -> None:
    cls = provider_module.TVMFFIJitCompiledFunctionBase
    original = cls.__init__

    def __init__(self, *args, **kwargs):
        original(self, *args, **kwargs)
        module, engine = getattr(self, "ir_module", None), getattr(self, "engine", None)
        if module is None or engine is None or id(module) not in _SITES:
            return
        for index, _ in enumerate(library_state_symbols(module)):
            _state["readers"].append(_tvm_ffi_reader(engine, index, _SITES[id(module)][1]))

    cls.__init__ = __init__


def _reader(library, sites: dict[int, str]):
    """Reads and clears the error record of one loaded cudaLibrary_t (None when it has none)."""
    from cuda.bindings import runtime as cudart
    err, pointer, size = cudart.cudaLibraryGetGlobal(library, b"__nvfp4emu_state")
    if err != cudart.cudaError_t.cudaSuccess or size < _HEADER_BYTES:
        return None

    def read() -> tuple[list[int], dict[int, str]] | None:
        words = bytearray(_HEADER_BYTES)
        if cudart.cudaMemcpy(words, pointer, _HEADER_BYTES, cudart.cudaMemcpyKind.cudaMemcpyDeviceToHost)[0] != 0:
            return None
        cudart.cudaMemset(pointer, 0, _RECORD_BYTES)
        cudart.cudaMemset(int(pointer) + _COUNTS_AT, 0, _HEADER_BYTES - _COUNTS_AT)
        return [int.from_bytes(words[i:i + 4], "little") for i in range(0, _HEADER_BYTES, 4)], sites
    return read


def _wrap_loader(executor_module) -> None:
    cls = executor_module.CudaDialectJitCompiledFunction
    original = cls._load_cuda_library

    def _load_cuda_library(self):
        libraries = original(self)
        sites = _SITES.get(id(getattr(self, "ir_module", None)), (None, {}))[1]
        for library in libraries:
            read = _reader(library, sites)
            if read:
                _state["readers"].append(read)
        return libraries

    cls._load_cuda_library = _load_cuda_library


def _wrap_argument_makers(runtime_module) -> None:
    """make_ptr and from_dlpack keep what they make until the next direct call, which counts those it is given."""
    for name in ("make_ptr", "from_dlpack"):
        original = getattr(runtime_module, name, None)
        if original is None:
            continue

        def make(*args, _original=original, **kwargs):
            made = _original(*args, **kwargs)
            _state["made"].append(made)
            return made

        make.__doc__, make.__name__ = original.__doc__, name
        setattr(runtime_module, name, make)


def _wrap_direct_call(jit_executor_module) -> None:
    """Counts the direct calls of a compiled function (not through TVM FFI, whose functions call into C) and the
    argument objects made for each: the host work such a call costs (arena/predict/b200.py, DSL_CALL_US)."""
    cls = jit_executor_module.JitCompiledFunction
    original = cls.__call__

    def __call__(self, *args, **kwargs):
        made = {id(o) for o in _state["made"]}
        _state["calls"] += 1
        _state["arguments"] += sum(1 for value in (*args, *kwargs.values()) if id(value) in made)
        _state["made"].clear()
        return original(self, *args, **kwargs)

    __call__.__doc__ = original.__doc__
    cls.__call__ = __call__


def take_host_counts() -> dict:
    """Direct calls of compiled CuTe DSL functions since the last take, and the argument objects (make_ptr,
    from_dlpack) made for them rather than kept from an earlier call; cleared."""
    counts = {"dsl_calls": _state["calls"], "dsl_arguments": _state["arguments"]}
    _state["calls"] = _state["arguments"] = 0
    _state["made"].clear()      # made before the next call began: kept by the submission, not made for a call
    return counts


_PATCHES = {COMPILER_MODULE: _wrap_compile, EXECUTOR_MODULE: _wrap_loader, TVM_FFI_MODULE: _wrap_tvm_ffi,
            JIT_EXECUTOR_MODULE: _wrap_direct_call, RUNTIME_MODULE: _wrap_argument_makers}


def install() -> None:
    """Target sm_100a and patch the DSL on import (once per process; the environment from
    toolchain.prepare() must be in os.environ)."""
    if _state["installed"]:
        return
    _environment()
    import_patch.install(_PATCHES)
    _state["installed"] = True


def compiled_sites() -> list[str]:
    """The rewritten instructions of every DSL module compiled in this process, whether its record is read or
    not."""
    return [instruction for _, sites in _SITES.values() for instruction in sites.values()]


def readers() -> list:
    """One reader per loaded DSL library: each call returns (its error record's words, the site names) and clears
    the record, or None when it cannot be read."""
    return list(_state["readers"])
