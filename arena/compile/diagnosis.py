"""One line naming why a CUDA build failed, from what the compiler printed: a missing header (CUTLASS's with the
install command), an instruction the target arch lacks (ptxas), or the first error with its file and line. Used by
build.py (`eval.py compile`) and by the worker (arena/worker/server.py), whose load_inline builds fail inside torch
("Error building extension 'x'" followed by ninja's log): both name a failure the same way.
"""
from __future__ import annotations

import os
import re

from arena.compile.nvcc import CUTLASS_INSTALL, system_includes
from arena.compile.sources import CompileError, find_sources

CUTLASS_MISSING = f"includes CUTLASS headers, which are not installed: {CUTLASS_INSTALL} (or set CUTLASS_PATH)"

_EMULATION = re.compile(r"^.*emulate-blackwell:.*$", re.M)
# gcc / nvcc's preprocessor: `a.cu:1:10: fatal error: cutlass/cutlass.h: No such file or directory`
_MISSING_HEADER = re.compile(r"^(?P<file>\S+?):(?P<line>\d+):(?:\d+:)? fatal error: (?P<header>\S+): "
                             r"No such file or directory", re.M)
# ptxas: `ptxas /tmp/x.ptx, line 21; error   : Instruction 'tcgen05.fence' not supported on .target 'sm_90'`
_PTXAS = re.compile(r"^ptxas\b.*?error\s*: (?P<what>.*(?:not supported on|requires) .*)$", re.M)
# nvcc's front end `b.cu(2): error: ...`; gcc `d.cpp:1:19: error: ...`
_ERROR_AT = re.compile(r"^(?P<file>\S+?)(?:\((?P<line>\d+)\):|:(?P<gline>\d+):(?:\d+:)?) (?:fatal )?error: "
                       r"(?P<message>.*)$", re.M)
_ANY_ERROR = re.compile(r"^.*\berror\b.*$", re.M)
_EXTENSION = re.compile(r"Error building extension '([^']+)'")


def build_failure(log: str) -> str:
    """The one line that names why the build that printed `log` failed."""
    found = _EMULATION.search(log)                 # --emulate-blackwell's own words
    if found:
        return found.group(0)[found.group(0).index("emulate-blackwell:"):].strip()
    found = _MISSING_HEADER.search(log)
    if found:
        header = found.group("header")
        if re.match(r"(cutlass|cute)/", header):
            including = found.group("file").replace("\\", "/")
            if re.search(r"/(cutlass|cute)/", including):       # CUTLASS's own header lacks one of its files
                return (f"header <{header}> not found, included by CUTLASS's own {including}:{found.group('line')}: "
                        f"an incomplete or mixed copy of CUTLASS; reinstall it: {CUTLASS_INSTALL}")
            return CUTLASS_MISSING
        return f"header <{header}> not found ({os.path.basename(found.group('file'))}:{found.group('line')})"
    found = _PTXAS.search(log)
    if found:
        return f"ptxas: {found.group('what').strip()}"
    found = _ERROR_AT.search(log)
    if found:
        line = found.group("line") or found.group("gline")
        return f"{os.path.basename(found.group('file'))}:{line}: error: {found.group('message').strip()}"
    found = _ANY_ERROR.search(log)
    lines = log.strip().splitlines()
    return (found.group(0) if found else lines[-1] if lines else "the build failed").strip()


def _from_cpp_extension(error: BaseException) -> bool:
    """The error was raised inside torch.utils.cpp_extension (load_inline / load)."""
    trace = error.__traceback__
    while trace is not None:
        if os.path.basename(trace.tb_frame.f_code.co_filename) == "cpp_extension.py":
            return True
        trace = trace.tb_next
    return False


_BUILT_NOT = re.compile(r"extension '([^']+)' does not build")
_LIBRARY_NEVER_WRITTEN = re.compile(r"/([\w.+-]+)\.so: cannot open shared object file")


class BuildFailures:
    """The load_inline extensions whose build failed in this process, each with the line that named why. torch
    does not rebuild sources it has already tried, so a later call fails with an ImportError of the library the
    failed build never wrote; that call is given the build's own cause instead."""

    def __init__(self):
        self.causes: dict[str, str] = {}

    def remember(self, explained: str) -> None:
        """`explained`: the line a failed call got (load_inline_failure's words, possibly behind a prefix)."""
        named = _BUILT_NOT.search(explained)
        if named:
            self.causes.setdefault(named.group(1), explained)

    def cause_of(self, error: BaseException) -> str | None:
        """The remembered cause when `error` is the import of a library whose build failed earlier, else None."""
        missing = _LIBRARY_NEVER_WRITTEN.search(str(error)) if isinstance(error, ImportError) else None
        return self.causes.get(missing.group(1)) if missing else None


def load_inline_failure(error: BaseException, submission: str) -> str | None:
    """One line for a load_inline that failed: the build's cause when it ran ("extension 'x' does not build:
    ..."), or, when torch could not even start it (a CPU-only torch has no CUDA_HOME), a constant source of
    `submission` (its path; "" when unknown) whose headers are missing here, as `eval.py compile` names it.
    None when `error` is not a load_inline failure or nothing here names its cause."""
    text = str(error)
    built = _EXTENSION.search(text)
    if built:
        return f"extension '{built.group(1)}' does not build: {build_failure(text[built.end():])}"
    if not submission or not _from_cpp_extension(error):
        return None
    try:
        sources = find_sources(submission)
    except (CompileError, OSError):
        return None
    for source in sources:
        missing = system_includes(source)
        if isinstance(missing, str):
            return f"{source.name} does not build: {missing}"
    return None
