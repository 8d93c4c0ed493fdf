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

from arena.report.results import CANNOT_JUDGE, CANNOT_JUDGE_HERE   # the words that count a case as not judged

ANNOUNCEMENT = ("--emulate-blackwell: the submission's CUDA code was built for sm_100a and its tcgen05 "
                "instructions run in software on this Hopper GPU (correctness only: no times are reported)")
CAPABILITY = (10, 0)

# Error codes of tcgen05_library.cu, in words. {a} and {b} are the two values the library recorded.
MESSAGES = {
    1: "this GPU has more SMs ({a}) than the emulation provides ({b})",
    2: "tcgen05.alloc of {a} columns: the column count must be a power of two from 32 to 512",
    3: "tcgen05.alloc of {a} columns waited on SM {b} while its tensor memory went unused for 2 s: its columns "
       "are held by a CTA that never ran tcgen05.dealloc (the columns were taken back)",
    4: "tcgen05.dealloc of address {a:#x}, {b} columns: this CTA did not allocate them",
    5: "tcgen05.dealloc of address {a:#x}, {b} columns: not an allocation's start and size",
    6: "columns {a}..{a}+{b} of tensor memory are not allocated to this CTA",
    7: "tensor memory address {a:#x} used by warp {b}: the access runs past the warp's 32-lane quarter "
       "(lanes 32*(warp % 4) .. +31)",
    8: "tensor memory lanes from address {a:#x} run past lane 127",
    9: "tensor memory columns {a}..{a}+{b} run past column 511",
    20: lambda a, b: f"instruction descriptor {a:#010x}: {_bits(b)} set, which the PTX ISA's descriptor table for "
                     f"this .kind marks reserved (or valid only for .kind::i8, .ws or sparse MMAs)" + _e2m1_hint(a, b),
    21: "instruction descriptor {a:#010x}: sparse MMA is not emulated",
    22: "instruction descriptor {a:#010x}: A/B data types are not valid for this .kind",
    23: lambda a, b: f"instruction descriptor {a:#010x}: the M field gives M = {_m(a, b)}; cta_group::1 takes M = 128 "
                     "(or 64 for the unscaled kinds)",
    24: "instruction descriptor {a:#010x}: scale-factor ids must be 0 with block16 (and 0 or 2 with block32)",
    25: "instruction descriptor {a:#010x}: K = 96 is sm_103a only",
    26: "instruction descriptor {a:#010x}: transposed (MN-major) operands are not emulated",
    27: "instruction descriptor {a:#010x}: the accumulator type is not emulated (F32, or S32 for .kind::i8)",
    28: "instruction descriptor {a:#010x}: the scale type does not match the block size (UE4M3 with block16, "
        "UE8M0 with block32)",
    30: lambda a, b: f"instruction descriptor {a:#010x}: N = {((a >> 17) & 0x3F) * 8} (bits 17-22, N >> 3) is not a valid N "
                     f"for .kind::{KIND_NAMES.get(b, b)} with cta_group::1: "
                     + ("8, 16, 24, 32, then multiples of 16 up to 256" if b == 3 else "a multiple of 8 from 8 to 256"),
    31: "instruction descriptor {a:#010x}: M = 64 (bits 24-28, M >> 4) is valid, but its accumulator layout is not "
        "emulated",
    32: lambda a, b: f"instruction descriptor {a:#010x}: transpose {'A' if a >> 15 & 1 else 'B'} (bit "
                     f"{15 if a >> 15 & 1 else 16}) is set, and .kind::mxf4 / .kind::mxf4nvf4 take K-major A and B "
                     "only (the PTX ISA's instruction descriptor table for these kinds): outside the ISA's contract, "
                     "its result on a B200 is not defined",
    40: "shared memory descriptor (high word {a:#010x}): bits 46-48 must be 0b001 on sm_100",
    41: "shared memory descriptor (high word {a:#010x}): invalid swizzle mode",
    42: "shared memory descriptor (high word {a:#010x}): a base offset other than 0 or the ISA's (start address >> 7) "
        "& 7 with a swizzle is not emulated",
    43: "shared memory descriptor (high word {a:#010x}): the absolute LBO mode is not emulated",
    50: "tcgen05.cp shape code {a} is not emulated",
    60: lambda a, b: f"SF{'AB'[a & 1]} {'row' if a & 1 == 0 else 'column'} {a >> 1} has different scale factors in lane "
                     f"quarters 0 and {b} of tensor memory; the PTX ISA asks for the same copy in all four 32-lane "
                     "quarters (tcgen05.cp .32x128b.warpx4 writes all four); this emulation reads the quarter of each "
                     "accumulator row",
    61: lambda a, b: f"shared memory descriptor (high word {a:#010x}) has SBO = {b} bytes with no swizzle: its 8-row "
                     "groups (8 rows x 16 bytes) overlap; a K-major source needs SBO >= 128 (128 for a 32x128b scale "
                     "atom)",
    64: lambda a, b: f"this tcgen05.ld reads tensor-memory columns {a}..{a}+{b} after this CTA freed them (a "
                     "tcgen05.dealloc before this warp's loads): they still hold the accumulator unless another CTA "
                     "allocates them first; synchronize the warps before tcgen05.dealloc",
    75: lambda a, b: f"this tcgen05.ld reads tensor-memory columns {a}..{a}+{b} that this CTA freed and another CTA "
                     "has allocated since: a warp freed them (tcgen05.dealloc) while this warp still had loads to do, "
                     "so the load may read the other CTA's data; synchronize the warps (tcgen05.wait::ld, then a "
                     "barrier) before tcgen05.dealloc",
    80: "tcgen05.alloc.cta_group::2 in a CTA of cluster rank {b} of a cluster of {a} CTAs: a CTA pair is cluster "
        "ranks 2k and 2k+1, and this CTA has no peer",
    81: lambda a, b: f"tcgen05.alloc.cta_group::2: the peer CTA (cluster rank {a}) "
                     + ("did not execute its tcgen05.alloc.cta_group::2 within 10 s (both CTAs of the pair must)"
                        if b == 0 else "could not be met: the emulation's table of CTA pairs is full"),
    82: "a .cta_group::2 instruction in a CTA (cluster rank {a} of {b}) that holds no tensor memory from "
        "tcgen05.alloc.cta_group::2: the pair's tensor memory must be allocated by both CTAs with .cta_group::2 first",
    83: lambda a, b: f"instruction descriptor {a:#010x}: M = {_m(a, b)} with cta_group::2; the emulation covers M = 256 "
                     "(128 rows per CTA of the pair); M = 128 across a pair is not emulated",
    84: lambda a, b: f"instruction descriptor {a:#010x}: N = {((a >> 17) & 0x3F) * 8} with cta_group::2: N must be a "
                     "multiple of 16 from 16 to 256 (each CTA of the pair holds N / 2 rows of B)",
    85: "tcgen05.mma.cta_group::2 with a disable-output-lane mask that disables lanes (the OR of its registers is "
        "{a:#x}): only the all-zero mask is emulated",
    86: lambda a, b: f"columns {a}..{a}+{b & 0xFFFF} of the tensor memory of the pair's "
                     f"{'even' if b >> 16 == 0 else 'odd'} CTA are not allocated to it (its tcgen05.alloc.cta_group::2 "
                     "did not take them, or it has deallocated them)",
    87: lambda a, b: ("a TMA with .cta_group::2 completes on the pair's other CTA's mbarrier "
                      + (f"from {b} lanes of one warp at once: the emulation forwards such loads one lane at a time "
                         "per warp" if b != 1 else f"while its destination is in CTA rank {a}, not the issuing CTA: "
                         "the emulation forwards only loads into the issuing CTA's own shared memory")),
    88: ("a TMA .multicast::cluster with .cta_group::2 from CTA rank {b} (ctaMask {a:#x}): the emulation loads the box "
         "into the issuing CTA and copies it to the mask's other CTAs, so the mask must hold the issuing CTA, the "
         "destination must be its own shared memory, and one lane of a warp issues it at a time"),
}
_OPERANDS = {0: "A operand", 1: "B operand", 2: "source"}


def _unfinished(a: int, b: int, sites: dict[int, str], lead: str, verb: str) -> str:
    """`lead` + the queued operation at site a + why it is unfinished (b: 0 never committed, else its commit's
    mbarrier + 1)."""
    operation = f"`{sites.get(a, f'call site {a}')}`"
    if b == 0:
        why = "that operation was never committed (no tcgen05.commit after it), so nothing orders it before this instruction"
    else:
        why = (f"its tcgen05.commit arrives on the mbarrier at shared address {b - 1:#x}, and no thread waited on that "
               "mbarrier's phase before this instruction")
    return f"{lead} {operation} still {verb}: {why}"


# Codes whose words need the module's call sites (a names another instruction).
SITE_MESSAGES = {
    70: lambda a, b, sites: f"this instruction writes or frees tensor-memory columns that `{sites.get(a, f'call site {a}')}` "
                            f"(warp {b}) has not finished reading: that load was neither waited for (tcgen05.wait::ld) "
                            "nor were its registers used yet, so the hardware may still be reading them",
    71: lambda a, b, sites: _unfinished(a, b, sites, "this tcgen05.ld reads tensor-memory columns that", "writes"),
    72: lambda a, b, sites: _unfinished(a, b, sites, "this tcgen05.dealloc frees tensor-memory columns that", "writes"),
    73: lambda a, b, sites: f"the {_OPERANDS.get(a, 'operand')} of this instruction in shared memory (descriptor start "
                            f"{b:#x}) changed after it was issued and before its tcgen05.commit's mbarrier completed: "
                            "the stage was refilled while the operation could still read it (wait on the mbarrier "
                            "the commit arrives on before overwriting the stage)",
    63: lambda a, b, sites: f"this tcgen05.dealloc frees tensor-memory columns that `{sites.get(a, f'call site {a}')}` "
                            f"(warp {b}) has not finished reading (no tcgen05.wait::ld, its registers not used yet): "
                            "another CTA may allocate and overwrite them while the load still reads; wait for the "
                            "load and synchronize the warps (tcgen05.wait::ld, then a barrier) before tcgen05.dealloc",
    74: lambda a, b, sites: _unfinished(a, b, sites, "this copy writes shared memory that", "reads")
                            + " (a stage refilled before the commit that frees it completed)",
}
MESSAGES[62] = ("a TMA uses a tensor map of element type {b} (word 2 = {a:#010x}): a Blackwell-only type other than "
                "packed FP4 (16U4_ALIGN8B), such as 16U4_ALIGN16B or 16U6_ALIGN16B, which the emulation does not "
                "translate for Hopper's TMA")
KIND_NAMES = {0: "f16", 1: "tf32", 2: "f8f6f4", 3: "i8", 4: "mxf8f6f4", 5: "mxf4", 6: "mxf4nvf4"}
MESSAGES[65] = ("columns {a}..{a}+{b} of tensor memory lie past this CTA's tcgen05.alloc, and no other CTA holds them: "
                "a B200 reads and writes them all the same, until another CTA on the SM allocates them (allocate "
                "every column the kernel uses)")
WARNINGS = (60, 61, 63, 64, 65)


def _bits(mask: int) -> str:
    bits = [str(i) for i in range(32) if mask >> i & 1]
    return ("bit " if len(bits) == 1 else "bits ") + ", ".join(bits)


def _m(a: int, kind: int) -> int:
    return ((a >> 27) & 3) * 128 if kind >= 4 else ((a >> 24) & 0x1F) * 16


def _e2m1_hint(a: int, mask: int) -> str:
    if mask >> 12 & 1 and (a >> 7) & 7 == 5:
        return ("; A/B type 5 is E2M1 under .kind::mxf8f6f4 (3-bit fields), while under .kind::mxf4/mxf4nvf4 "
                "the type fields are bits 7-9 and 10-11 and E2M1 = 1")
    return ""


class EmulationError(RuntimeError):
    """One line: what an emulated tcgen05 instruction of the submission did wrong. `code`: the library's error
    code; `module`: the CUDA extension that recorded it (None for a CuTe DSL or Triton kernel)."""

    def __init__(self, line: str, code: int = 0, module: str | None = None):
        super().__init__(line)
        self.code, self.module = code, module


class EmulationBuildError(RuntimeError):
    """One line from the build shims: what in the submission's CUDA code cannot be emulated, or why the
    emulated build failed."""


_state = {"modules": [], "installed": False, "warned": set()}


def describe(record: list[int], sites: dict[int, str]) -> str:
    code, site, a, b = record[:4]
    message = MESSAGES.get(code, "emulation error {code}")
    if code in SITE_MESSAGES:
        what = SITE_MESSAGES[code](a, b, sites)
    else:
        what = message(a, b) if callable(message) else message.format(a=a, b=b, code=code)
    where = f"CTA ({record[4]},{record[5]},{record[6]}) thread {record[7]}"
    instruction = sites.get(site, f"call site {site}")
    label = "emulated tcgen05 warning" if code in WARNINGS else "emulated tcgen05"
    return f"{label}: {what}; at `{instruction}` ({where})"


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
            read = ctypes.CDLL(module_file).__nvfp4emu_read_state
        except (OSError, AttributeError):
            continue
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
        if words[8] and (id(sites), words[8], words[9]) not in _state["warned"]:
            _state["warned"].add((id(sites), words[8], words[9]))
            print(describe(words[8:16], sites), file=sys.stderr, flush=True)
        if words[0]:
            raise EmulationError(describe(words, sites), words[0])


_OTHER_DSL_PIN = re.compile(r"nvidia-cutlass-dsl\s*==\s*([\w.]+)")
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
    pinned = _OTHER_DSL_PIN.search(_state.get("source", ""))
    if pinned and isinstance(error, (AttributeError, ImportError)) and re.search(r"\bcutlass\b|\bcute\b", text):
        from arena.blackwell.missing import CUTE_DSL_PIN
        if pinned.group(1) != CUTE_DSL_PIN:
            return (f"{CANNOT_JUDGE_HERE}: the submission installs nvidia-cutlass-dsl=={pinned.group(1)} at import (the "
                    f"jail has no network) and CuTe DSL {CUTE_DSL_PIN} here lacks a name it uses: {first[:160]}")
    if _CUBLASLT_FP4_SOURCE.search(_state.get("source", "")) and not isinstance(error, (SyntaxError, NameError)):
        return (f"{CANNOT_JUDGE}: the submission calls cuBLASLt's block-scaled FP4 matmul (CUDA_R_4F_E2M1 / a "
                f"VEC16_UE4M3 scale mode), which cuBLASLt runs only on a Blackwell GPU and the emulation does not "
                f"cover; here it raised {first[:160]}")
    if _CUBLAS_FP4.search(text):
        return (f"{CANNOT_JUDGE}: cuBLAS(Lt) refused the call ({_fault_words(text)}): its NVFP4 (block-scaled FP4) "
                f"matmul runs only on a Blackwell GPU, and the emulation covers tcgen05 kernels, not cuBLAS")
    if _DEVICE_FAULT.search(text):
        return (f"{CANNOT_JUDGE}: {_fault_words(text)} in {_kernels_loaded()}, and no emulated instruction recorded "
                f"an error: the fault lies in what the emulation does not model (a B200 may run it; the traceback "
                f"holds CUDA's words)")
    return None


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
RERUN_SYNCHRONOUSLY = {73: "an operand in shared memory changed before the operation completed",
                       72: "tensor memory freed while an operation no thread waited for was still queued"}


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
    path = getattr(module, "__file__", None)
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
