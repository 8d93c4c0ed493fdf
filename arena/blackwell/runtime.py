"""The worker side of `--emulate-blackwell` (installed before the submission is imported):

- routes every torch.utils.cpp_extension build through arena/blackwell/toolchain.py (compute_100a device
  code, tcgen05 rewritten into the emulation library, assembled for sm_90a), and CuTe DSL and Triton kernels
  the same way (arena/blackwell/cute_dsl.py, triton_target.py);
- shows the submission a Blackwell GPU: torch.cuda.get_device_capability() is (10, 0) and
  get_device_properties() says major 10, minor 0 (every other property is the real GPU's);
- after each call, reads each emulated extension's error record and raises `EmulationError` with one line
  naming the tcgen05 instruction (its PTX text) and what it did wrong.
"""
from __future__ import annotations

import ctypes
import glob
import hashlib
import json
import os
import re
import sys

from arena.blackwell.error_words import MESSAGES, WARNINGS, describe  # noqa: F401  (the library's codes in words)
from arena.report.results import CANNOT_JUDGE, CANNOT_JUDGE_HERE   # the words that count a case as not judged

ANNOUNCEMENT = ("--emulate-blackwell: the submission's CUDA code was built for sm_100a and its tcgen05 "
                "instructions run in software on this Hopper GPU (correctness only: predict models a B200's time)")
CAPABILITY = (10, 0)

class EmulationError(RuntimeError):
    """One line: what an emulated tcgen05 instruction of the submission did wrong. `code`: the library's error
    code; `module`: the CUDA extension that recorded it (None for a CuTe DSL or Triton kernel)."""

    def __init__(self, line: str, code: int = 0, module: str | None = None):
        super().__init__(line)
        self.code, self.module = code, module


class EmulationBuildError(RuntimeError):
    """One line from the build shims: what in the submission's CUDA code cannot be emulated, or why the
    emulated build failed."""


_state = {"modules": [], "installed": False, "warned": set(), "counts": [0] * 14, "dsl_version": None,
          "cublaslt_fp4_calls": 0}

# Words 18-31 of the library's record: what the emulated kernels issued since the last `take_counts` (the
# B200 time model's inputs, arena/predict/b200.py). Each is summed over calls and modules, or its largest kept.
COUNT_WORDS = (("mmas", "sum"), ("mma_work_8k", "sum"), ("pair_mmas", "sum"), ("tma_loads", "sum"),
               ("tma_bytes_16", "sum"), ("grid_ctas", "max"), ("cta_threads", "max"), ("cluster_ctas", "max"),
               ("allocs", "sum"), ("max_n", "max"), ("max_m", "max"), ("commits", "sum"),
               ("scale_copies", "sum"), ("dynamic_smem", "max"))


def _add_counts(words) -> None:
    total = _state["counts"]
    for i, ((_, how), value) in enumerate(zip(COUNT_WORDS, words)):
        total[i] = total[i] + int(value) if how == "sum" else max(total[i], int(value))


def take_counts() -> dict:
    """What the emulated kernels issued since the last call of this (and clears it): MMAs and their work in
    multiply-adds, tensor TMA loads and their bytes, the largest grid, CTA, cluster and MMA shape."""
    counts = dict(zip((name for name, _ in COUNT_WORDS), _state["counts"]))
    _state["counts"] = [0] * len(COUNT_WORDS)
    counts["mma_work"] = counts.pop("mma_work_8k") * 8192
    counts["tma_bytes"] = counts.pop("tma_bytes_16") * 16
    counts["mma_sites"] = emulated_mma_sites()
    counts["cublaslt_fp4_calls"], _state["cublaslt_fp4_calls"] = _state["cublaslt_fp4_calls"], 0
    from arena.blackwell import cute_dsl
    counts.update(cute_dsl.take_host_counts())
    return counts


def emulated_mma_sites() -> int:
    """tcgen05.mma instructions in the emulated modules built so far (CUDA extensions, CuTe DSL kernels): beside a
    call that counted no MMA, they say its counts may be out of reach rather than none."""
    from arena.blackwell import cute_dsl
    known = _state.setdefault("mma_sites", {})      # a built module's sites never change: read its files once
    for module in _state["modules"]:
        if module not in known:
            known[module] = sum(1 for i in _sites(module).values() if "tcgen05.mma" in i)
    return sum(known[m] for m in _state["modules"]) + sum(1 for i in cute_dsl.compiled_sites() if "tcgen05.mma" in i)


def _sites(module_file: str) -> dict[int, str]:
    found = {}
    for path in glob.glob(os.path.join(os.path.dirname(module_file), "*.emu.json")):
        try:
            with open(path) as f:
                for row in json.load(f):
                    found[int(row["site"])] = str(row["instruction"])
        except (OSError, ValueError, KeyError):
            continue
    return found


def raise_on_error():
    """After a call: the first error any emulated extension recorded, as one line. A warning (words 8-15 of the
    record) is printed once per instruction and kind, on stderr, which the report shows as the submission's
    output."""
    for module_file in _state["modules"]:
        try:
            library = ctypes.CDLL(module_file)
            read = library.__nvfp4emu_read_state
        except (OSError, AttributeError):
            continue
        take_lt_calls = getattr(library, "__nvfp4emu_take_lt_fp4_calls", None)     # emulation_cublaslt.h
        if take_lt_calls is not None:
            take_lt_calls.restype = ctypes.c_uint
            _state["cublaslt_fp4_calls"] += take_lt_calls()
        counts = (ctypes.c_uint * len(COUNT_WORDS))()
        read_counts = getattr(library, "__nvfp4emu_read_counts", None)
        if read_counts is not None and read_counts(counts) == 0:
            _add_counts(counts)
        buffer = (ctypes.c_uint * 16)()
        if read(buffer) != 0:
            continue
        if buffer[8]:
            warning = list(buffer)[8:16]
            key = (module_file, warning[0], warning[1])
            if key not in _state["warned"]:
                _state["warned"].add(key)
                print(describe(warning, _sites(module_file)), file=sys.stderr, flush=True)
        if buffer[0]:
            raise EmulationError(describe(list(buffer), _sites(module_file)), buffer[0], module_file)
    from arena.blackwell import cute_dsl, triton_target
    for read in cute_dsl.readers() + triton_target.readers():
        got = read()
        if not got:
            continue
        words, sites = got
        _add_counts(words[18:32])
        if words[8] and (id(sites), words[8], words[9]) not in _state["warned"]:
            _state["warned"].add((id(sites), words[8], words[9]))
            print(describe(words[8:16], sites), file=sys.stderr, flush=True)
        if words[0]:
            raise EmulationError(describe(words, sites), words[0])


# A fault of the GPU itself, as CUDA, the driver or cuda-python word it.
_DEVICE_FAULT = re.compile(r"illegal instruction|illegal memory access|misaligned address|unspecified launch failure|"
                           r"CUDA_ERROR_(INVALID_HANDLE|ILLEGAL_\w+|LAUNCH_FAILED|MISALIGNED_ADDRESS|HARDWARE_STACK_ERROR|"
                           r"INVALID_PC|ASSERT|NOT_SUPPORTED)|invalid resource handle|device-side assert|"
                           r"hardware stack error|invalid program counter", re.I)
_CUBLAS_FP4 = re.compile(r"cuBLAS error: 15\b|CUBLAS_STATUS_NOT_SUPPORTED|cublasLt\w*.*(not supported|error 15)", re.I)


_CUBLASLT_FP4_SOURCE = re.compile(r"cublasLt[\s\S]*(CUDA_R_4F_E2M1|SCALE_VEC16_UE4M3|SCALE_VEC32_UE8M0)|"
                                  r"(CUDA_R_4F_E2M1|SCALE_VEC16_UE4M3|SCALE_VEC32_UE8M0)[\s\S]*cublasLt")


def note_submission(path: str) -> None:
    """The submission's source, for `cannot_judge` (a call into cuBLASLt's NVFP4 matmul fails here however its
    own code words the error), and its own folder of extension builds inside the emulation folder: evaluations
    of different files that run at once without a jail share that folder, and two files that name their
    extension alike (versions of one kernel) would otherwise build into one folder and load each other's
    library (a corpus of 40 at once: versions of one GEMM failed with another version's wrong result or an
    illegal instruction)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return
    _state["source"] = data.decode(errors="replace")
    from arena.blackwell import dsl_versions
    from arena.blackwell.missing import installed_dsl_version
    _state["dsl_version"] = dsl_versions.activate(_state["source"], installed_dsl_version())
    base = os.environ.get("TORCH_EXTENSIONS_DIR")
    if base:
        os.environ["TORCH_EXTENSIONS_DIR"] = os.path.join(base, hashlib.sha256(data).hexdigest()[:24])


def cannot_judge(error: BaseException) -> str | None:
    """One line when `error` says the emulation cannot judge the submission here rather than that it is wrong:
    a form the emulation does not model (its own "not emulated" / "cannot emulate" words), cuBLASLt's NVFP4
    matmul, or a device fault no emulated instruction accounts for. None for anything else."""
    text = str(error).strip()
    first = text.splitlines()[0] if text else type(error).__name__
    if type(error).__name__ in ("EmulationError", "EmulationBuildError"):
        if "not emulated" in first or "cannot emulate" in first:
            return f"{CANNOT_JUDGE}: {first} (the emulation's limit, not a fault of the submission)"
        return None
    from arena.blackwell import dsl_versions
    version = dsl_versions.pinned_version(_state.get("source", ""))
    if version and isinstance(error, (AttributeError, ImportError)) and re.search(r"\bcutlass\b|\bcute\b", text):
        from arena.blackwell.missing import CUTE_DSL_PIN
        if version != CUTE_DSL_PIN and not _state.get("dsl_version"):
            return (f"{CANNOT_JUDGE_HERE}: the submission installs nvidia-cutlass-dsl=={version} at import (the "
                    f"jail has no network) and CuTe DSL {CUTE_DSL_PIN} here lacks a name it uses: {first[:160]} "
                    f"(with CuTe DSL {version} unpacked in {os.path.join(dsl_versions.VERSIONS_DIR, version)} "
                    f"the file runs with it: docs/blackwell_emulation.md)")
    if _CUBLASLT_FP4_SOURCE.search(_state.get("source", "")) and not isinstance(error, (SyntaxError, NameError)):
        return (f"{CANNOT_JUDGE}: the submission calls cuBLASLt's block-scaled FP4 matmul (CUDA_R_4F_E2M1 / a "
                f"VEC16_UE4M3 scale mode), which cuBLASLt runs only on a Blackwell GPU; the emulation runs the forms "
                f"arena/blackwell/emulation_cublaslt.h models, and here it raised {first[:160]}")
    if _CUBLAS_FP4.search(text):
        return (f"{CANNOT_JUDGE}: cuBLAS(Lt) refused the call ({_fault_words(text)}): its NVFP4 (block-scaled FP4) "
                f"matmul runs only on a Blackwell GPU; the emulation runs cuBLASLt's only when a CUDA source it "
                f"builds makes the call (arena/blackwell/emulation_cublaslt.h)")
    if _DEVICE_FAULT.search(text):
        return (f"{CANNOT_JUDGE}: {_fault_words(text)} in {_kernels_loaded()}, and no emulated instruction recorded "
                f"an error: the fault lies in what the emulation does not model (a B200 may run it; the traceback "
                f"holds CUDA's words){_CLC_WORDS if _uses_cluster_launch_control() else ''}")
    return None


# Cluster launch control decides which clusters start and which tiles each takes over (arena/blackwell/ptx_sm100.py
# emulates the B200's cancels): here about one cluster per SM of this GPU starts, and which ones differs from a
# B200's 148 SMs. A kernel that relies on which clusters start (a workspace sized by the SM count and indexed by
# cluster, as a public CuTe DSL group GEMM has) can fault here and not there: the line says so.
_CLC_WORDS = ("; the kernel uses cluster launch control (clusterlaunchcontrol.try_cancel): which clusters start "
              "and which tiles each takes over follow this GPU's SM count here, not a B200's 148 SMs, and a kernel "
              "that sizes a workspace by the SM count and indexes it by cluster can fault on one and not the other")


def _uses_cluster_launch_control() -> bool:
    from arena.blackwell import cute_dsl
    instructions = [i for module in _state["modules"] for i in _sites(module).values()] + cute_dsl.compiled_sites()
    return any("clusterlaunchcontrol." in i for i in instructions)


def _fault_words(text: str) -> str:
    found = _CUBLAS_FP4.search(text) or _DEVICE_FAULT.search(text)
    return found.group(0) if found else text.splitlines()[0][:120]


def _kernels_loaded() -> str:
    """Which emulated code the submission loaded (the construct the fault came from)."""
    from arena.blackwell import cute_dsl, triton_target
    kinds = [name for name, present in (("a CUDA extension", _state["modules"]),
                                         ("a CuTe DSL kernel", cute_dsl.readers()),
                                         ("a Triton kernel", triton_target.readers())) if present]
    return " and ".join(kinds) if kinds else "code the emulation did not build (no emulated kernel was loaded)"


def _build_error(error: BaseException) -> BaseException:
    """A failed emulated build: the shim's one line, when there is one."""
    for line in str(error).splitlines():
        if "emulate-blackwell:" in line:
            return EmulationBuildError(line[line.index("emulate-blackwell:"):].strip())
    return error


# Set to 1, every emulated tcgen05 operation completes at issue (the synchronous model): for comparing the two.
SYNCHRONOUS_VARIABLE = "ARENA_EMULATION_SYNCHRONOUS"

# Races a B200 tolerates in practice, run again in the synchronous model. 73: an operand in shared memory changed
# between an operation's issue and its commit's completion. The emulation completes operations as late as the
# memory model allows; a B200 completes them within a few hundred ns, before a refill lands. A public GEMM whose
# 128 threads each issue the same scale copies (one commits) passed on its author's B200 and failed here on 3 of
# 13 shapes: the copies no commit covers ran after the next tile's TMA had refilled their source.
# 72: a tcgen05.dealloc while an operation no commit covers is still queued (the same GEMM's copies, once more:
# a B200 had finished them long before; 1 case of 13).
# 75: a tcgen05.ld of columns another warp of the CTA freed and another CTA took since (the same GEMM frees tensor
# memory from one warp with no barrier after the others' loads; with twelve evaluations sharing two GPUs, a warp
# stopped longer than the library's 2 ms hold on freed columns, 1 shape of 13). The synchronous run holds them 200 ms.
RERUN_SYNCHRONOUSLY = {73: "an operand in shared memory changed before the operation completed",
                       72: "tensor memory freed while an operation no thread waited for was still queued",
                       75: "tensor memory freed by one warp while another still loaded it"}


def checked_call(call):
    """One call of the submission (`call` runs it and synchronizes), then `raise_on_error`. A race a B200
    tolerates in practice (RERUN_SYNCHRONOUSLY) in a CUDA extension: the call runs again with every tcgen05
    operation completing at issue, as on a B200 that finishes it before the refill lands; its result stands,
    with a warning naming the race. Any other error, or one the second run records too, is raised."""
    out = call()
    try:
        raise_on_error()
    except EmulationError as error:
        if error.code not in RERUN_SYNCHRONOUSLY or error.module is None or \
                os.environ.get(SYNCHRONOUS_VARIABLE) == "1":
            raise
        _set_synchronous(1)
        try:
            out = call()
            raise_on_error()
        finally:
            _set_synchronous(0)
        warning = str(error).replace("emulated tcgen05:", "emulated tcgen05 warning:", 1)
        print(f"{warning}. A race a B200 tolerates in practice ({RERUN_SYNCHRONOUSLY[error.code]}): the call ran "
              "again with every tcgen05 operation completing at issue, and that result is the one checked",
              file=sys.stderr, flush=True)
    return out


def _set_synchronous(on: int) -> None:
    for path in _state["modules"]:
        try:
            ctypes.CDLL(path).__nvfp4emu_set_synchronous(on)
        except (OSError, AttributeError):
            pass


def _record(module):
    # load_inline/load return the module, or with is_python_module=False (kernels reached through torch.ops) the
    # path of the library they loaded: either way its record holds the errors and work counts
    path = module if isinstance(module, str) else getattr(module, "__file__", None)
    if path and path not in _state["modules"]:
        _state["modules"].append(path)
        if os.environ.get(SYNCHRONOUS_VARIABLE) == "1":
            _set_synchronous(1)
    return module


def install(torch) -> None:
    """Route the builds, show sm_100, and watch the extensions (once per process)."""
    if _state["installed"]:
        return
    from arena.blackwell import cute_dsl, toolchain, triton_target
    os.environ.update(toolchain.prepare())
    cute_dsl.install()      # CuTe DSL kernels: compiled for sm_100a, rewritten, loaded as sm_90a
    triton_target.install()     # Triton kernels: compiled for cuda:100 through the same ptxas shim
    import torch.utils.cpp_extension as cpp_extension

    for name in ("load_inline", "load"):
        original = getattr(cpp_extension, name)

        def wrapped(*args, _original=original, **kwargs):
            try:
                return _record(_original(*args, **kwargs))
            except Exception as error:
                raised = _build_error(error)
                if raised is error:
                    raise
                raise raised from None
        wrapped.__name__, wrapped.__doc__ = original.__name__, original.__doc__
        setattr(cpp_extension, name, wrapped)

    real_properties = torch.cuda.get_device_properties

    class BlackwellView:
        """The real device's properties with Blackwell's compute capability."""

        def __init__(self, real):
            self._real = real
            self.major, self.minor = CAPABILITY

        def __getattr__(self, item):
            return getattr(self._real, item)

        def __repr__(self):
            return repr(self._real).replace(f"major={self._real.major}, minor={self._real.minor}",
                                            f"major={self.major}, minor={self.minor}")

    torch.cuda.get_device_capability = lambda device=None: CAPABILITY
    torch.cuda.get_device_properties = lambda device=None: BlackwellView(real_properties(device))
    _state["installed"] = True
