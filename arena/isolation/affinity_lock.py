"""Cores a submission cannot widen: a seccomp filter, installed by the worker before torch or the submission
runs, that answers sched_setaffinity with EPERM for the worker and everything it starts (filters are inherited
and cannot be removed). The worker runs on the cores its evaluation was given (`eval.py batch` claims a block
per evaluation; a single run keeps the cores it was started on); without the filter one call of the
submission's own (os.sched_setaffinity, taskset) takes every core of the host, and with them its neighbours'.
Reading the affinity stays allowed. System calls of another ABI (32-bit, x32) are refused whole: nothing the
evaluator runs uses them, and they would carry sched_setaffinity under another number.

Standard library only (ctypes): classic BPF assembled here, as libseccomp would export it.
"""
from __future__ import annotations

import ctypes
import errno
import platform
import struct

# per machine: (AUDIT_ARCH_*, __NR_sched_setaffinity, __NR_seccomp)
ARCHES = {"x86_64": (0xC000003E, 203, 317), "aarch64": (0xC00000B7, 122, 277)}
X32_SYSCALL_BIT = 0x40000000

PR_SET_NO_NEW_PRIVS = 38
SECCOMP_SET_MODE_FILTER = 1
SECCOMP_FILTER_FLAG_TSYNC = 1           # every thread of the process, not only the calling one
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
# classic BPF opcodes
LD_W_ABS = 0x20                         # BPF_LD | BPF_W | BPF_ABS
JEQ_K = 0x15                            # BPF_JMP | BPF_JEQ | BPF_K
JGE_K = 0x35                            # BPF_JMP | BPF_JGE | BPF_K
RET_K = 0x06                            # BPF_RET | BPF_K
OFFSET_NR, OFFSET_ARCH = 0, 4           # in struct seccomp_data


def program(machine: str) -> list[tuple[int, int, int, int]]:
    """The filter for `machine` as (code, jt, jf, k) instructions."""
    audit_arch, setaffinity, _ = ARCHES[machine]
    refuse = SECCOMP_RET_ERRNO | errno.EPERM
    return [
        (LD_W_ABS, 0, 0, OFFSET_ARCH),
        (JEQ_K, 1, 0, audit_arch),              # another ABI: refused whole
        (RET_K, 0, 0, refuse),
        (LD_W_ABS, 0, 0, OFFSET_NR),
        (JGE_K, 2, 0, X32_SYSCALL_BIT),         # x32 numbers on x86_64 (never on aarch64)
        (JEQ_K, 1, 0, setaffinity),
        (RET_K, 0, 0, SECCOMP_RET_ALLOW),
        (RET_K, 0, 0, refuse),
    ]


def lock_affinity() -> str:
    """Install the filter on this process and its future children: '' when done, else why not (one line)."""
    machine = platform.machine()
    if machine not in ARCHES:
        return f"the cores are not locked: no seccomp filter for {machine}"
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError as error:
        return f"the cores are not locked: {error}"
    code = b"".join(struct.pack("HBBI", *op) for op in program(machine))
    filters = ctypes.create_string_buffer(code, len(code))

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
    prog = Program(len(code) // 8, ctypes.addressof(filters))
    # Without root, a filter needs no_new_privs (the jail's setpriv sets it already).
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return f"the cores are not locked: prctl(NO_NEW_PRIVS): {errno.errorcode.get(ctypes.get_errno())}"
    seccomp = ARCHES[machine][2]
    if libc.syscall(seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, ctypes.byref(prog)) != 0:
        return f"the cores are not locked: seccomp: {errno.errorcode.get(ctypes.get_errno())}"
    return ""
