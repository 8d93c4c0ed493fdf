"""The worker side of `--emulate-blackwell` (installed before the submission is imported):

- routes every torch.utils.cpp_extension build through arena/blackwell/toolchain.py (compute_100a device
  code, tcgen05 rewritten into the emulation library, assembled for sm_90a);
- shows the submission a Blackwell GPU: torch.cuda.get_device_capability() is (10, 0) and
  get_device_properties() says major 10, minor 0 (every other property is the real GPU's);
- after each call, reads each emulated extension's error record and raises `EmulationError` with one line
  naming the tcgen05 instruction (its PTX text) and what it did wrong.
"""
from __future__ import annotations

import ctypes
import glob
import json
import os

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
    10: "a .sync.aligned tcgen05 instruction ran with only some lanes of the warp (active mask {a:#010x})",
    20: "instruction descriptor {a:#010x}: reserved bits are set",
    21: "instruction descriptor {a:#010x}: sparse MMA is not emulated",
    22: "instruction descriptor {a:#010x}: A/B data types are not valid for this .kind",
    23: "instruction descriptor {a:#010x}: M must be 128 and N a multiple of 8 in 8..256 (cta_group::1)",
    24: "instruction descriptor {a:#010x}: scale-factor ids must be 0 with block16 (and 0 or 2 with block32)",
    25: "instruction descriptor {a:#010x}: K = 96 is sm_103a only",
    26: "instruction descriptor {a:#010x}: transposed (MN-major) operands are not emulated",
    27: "instruction descriptor {a:#010x}: the accumulator type is not emulated (F32, or S32 for .kind::i8)",
    28: "instruction descriptor {a:#010x}: the scale type does not match the block size (UE4M3 with block16, "
        "UE8M0 with block32)",
    40: "shared memory descriptor (high word {a:#010x}): bits 46-48 must be 0b001 on sm_100",
    41: "shared memory descriptor (high word {a:#010x}): invalid swizzle mode",
    42: "shared memory descriptor (high word {a:#010x}): a non-zero base offset is not emulated",
    43: "shared memory descriptor (high word {a:#010x}): the absolute LBO mode is not emulated",
    50: "tcgen05.cp shape code {a} is not emulated",
}


class EmulationError(RuntimeError):
    """One line: what an emulated tcgen05 instruction of the submission did wrong."""


class EmulationBuildError(RuntimeError):
    """One line from the build shims: what in the submission's CUDA code cannot be emulated, or why the
    emulated build failed."""


_state = {"modules": [], "installed": False}


def describe(record: list[int], sites: dict[int, str]) -> str:
    code, site, a, b = record[:4]
    what = MESSAGES.get(code, "emulation error {code}").format(a=a, b=b, code=code)
    where = f"CTA ({record[4]},{record[5]},{record[6]}) thread {record[7]}"
    instruction = sites.get(site, f"call site {site}")
    return f"emulated tcgen05: {what}; at `{instruction}` ({where})"


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
    """After a call: the first error any emulated extension recorded, as one line."""
    for module_file in _state["modules"]:
        try:
            read = ctypes.CDLL(module_file).__nvfp4emu_read_state
        except (OSError, AttributeError):
            continue
        buffer = (ctypes.c_uint * 16)()
        if read(buffer) == 0 and buffer[0]:
            raise EmulationError(describe(list(buffer), _sites(module_file)))


def _build_error(error: BaseException) -> BaseException:
    """A failed emulated build: the shim's one line, when there is one."""
    for line in str(error).splitlines():
        if "emulate-blackwell:" in line:
            return EmulationBuildError(line[line.index("emulate-blackwell:"):].strip())
    return error


def _record(module):
    path = getattr(module, "__file__", None)
    if path and path not in _state["modules"]:
        _state["modules"].append(path)
    return module


def install(torch) -> None:
    """Route the builds, show sm_100, and watch the extensions (once per process)."""
    if _state["installed"]:
        return
    from arena.blackwell import toolchain
    os.environ.update(toolchain.prepare())
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
