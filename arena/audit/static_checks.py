"""Static warnings on a submission's text: patterns seen in known benchmark exploits (never blocking).

They are hints for a reviewer, not verdicts: an honest kernel may use a CUDA stream or a cache, and a
cheat can hide from any regular expression. The competition itself rejects any submission containing the
word `stream` (case-insensitive, anywhere, comments included), so that one is worth fixing before upload.
"""
from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass
class Finding:
    code: str
    message: str
    lines: list

    def __str__(self) -> str:
        where = ", ".join(str(n) for n in self.lines[:5]) + (" ..." if len(self.lines) > 5 else "")
        return f"[{self.code}] {self.message} (line {where})"

    def as_dict(self) -> dict:
        return {"code": self.code, "message": self.message, "lines": self.lines}


# (code, pattern, message); patterns are searched line by line, case-sensitive unless (?i).
RULES = (
    ("stream", r"(?i)stream",
     "contains the word 'stream': the competition rejects such submissions outright, and work on a side "
     "stream can escape the timer"),
    ("scaled-mm", r"_scaled_mm",
     "calls torch._scaled_mm, the reference itself (cuBLAS), not a kernel of its own"),
    ("library-gemm", r"\btorch\.(mm|matmul|bmm|einsum|addmm|baddbmm)\b|\.matmul\(|\bF\.linear\(|"
                     r"\btorch\.nn\.functional\.linear\(",
     "calls a library GEMM (torch.mm / torch.matmul / ...)"),
    # data_ptr() as a key (a subscript, a comparison, a tuple, a name for a key or cache), not as the argument
    # every launch passes (CuTe DSL's make_ptr(dtype, t.data_ptr(), ...): 21 of 58 public files before)
    ("pointer-cache", r"\bid\(|\._version\b|untyped_storage\(\)\.data_ptr|(?<=[\w\]\)])\[[^\]\n]*\.data_ptr\(\)|"
                      r"\.data_ptr\(\)\s*(==|!=|\bin\b|\bnot\s+in\b)|(==|!=)\s*[\w.\[\]-]*\.data_ptr\(\)|"
                      r"(?<![\w\]\)(])\((?:[^()\n]|\([^()\n]*\))*\.data_ptr\(\)|"
                      r"(?i:\w*(key|cache|seen|memo)\w*)\s*=[^=].*\.data_ptr\(\)",
     "keys something on id(), data_ptr() or _version: a result cache keyed on pointers replays old results"),
    ("cuda-graph", r"CUDAGraph|cuda\.graph\b|cudaGraphLaunch|\.replay\(\)|make_graphed_callables",
     "uses CUDA graphs: a graph replay keyed on input pointers returns results for old inputs"),
    ("introspection", r"\bimport gc\b|\bgc\.(get_objects|get_referrers|get_referents)|\binspect\.|"
                      r"sys\._getframe|\bf_back\b|\bf_locals\b|\bf_globals\b|\bimport inspect\b",
     "inspects the interpreter (gc, frames): can reach the harness's inputs, outputs or timers"),
    ("proc", r"/proc\b|/dev/fd\b",
     "reads /proc or /dev/fd: the secret seed and the result pipe have leaked that way"),
    ("ctypes-cuda", r"\bctypes\b.*(cudart|libcuda|cuda)|(cudart|libcuda)\w*\.so|CDLL\(",
     "loads a CUDA library with ctypes: can redirect events, graphs or streams below PyTorch"),
    ("harness-patch", r"(perf_counter(_ns)?|elapsed_time|synchronize|Event|time_calls_\w+|clear_l2_cache|"
                      r"Connection\.\w+|ForkingPickler\.\w+)\s*=[^=]|\bsys\.modules\[|__main__|\b(import|from)\s+arena\b|"
                      r"\barena\.\w",
     "assigns to timer or harness names, or reaches into the harness (arena, __main__, sys.modules)"),
    ("threads", r"\bthreading\b|\bThread\(|concurrent\.futures|\bos\.fork\b|\bmultiprocessing\b|"
                r"\bsubprocess\b|\bos\.system\(",
     "starts threads or processes: work or writes can land after the call returned"),
    ("environment", r"POPCORN|\bos\.environ\b|\bgetenv\(",
     "reads the environment (POPCORN_SEED / POPCORN_FD are the harness's secrets)"),
    ("event-timing-off", r"disable_timing|cudaEventDisableTiming|enable_timing\s*=\s*False",
     "creates events without timing"),
)

_DIRECTIVE = re.compile(r"#!POPCORN\s")
_COMPILED = [(code, re.compile(pattern), message) for code, pattern, message in RULES]
# Rules about Python's own objects, not read inside string literals: in the C++/CUDA source a submission hands
# to load_inline, `t.data_ptr()` is how every launch passes its pointers, not a cache key
PYTHON_ONLY = ("pointer-cache",)


def _string_lines(text: str) -> set[int]:
    """The (1-based) lines that lie wholly inside a multi-line string literal (embedded C++/CUDA source)."""
    import io
    import tokenize
    inside = set()
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.STRING and token.end[0] > token.start[0]:
                inside.update(range(token.start[0] + 1, token.end[0]))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass                            # not Python as a whole: every line is read
    return inside


# Rules that speak to the competition's point (a kernel of one's own) and not to this project's own tasks, whose
# point is the precision contract and whose example submissions are pure-PyTorch references.
COMPETITION_ONLY = {"library-gemm": ("nvfp4_gemm", "nvfp4_gemv", "nvfp4_dual_gemm", "nvfp4_group_gemm")}


def scan_text(text: str, task: str | None = None) -> list[Finding]:
    """Every rule that matches, with the (1-based) line numbers where it does; `task` (the task's name) drops
    the rules that do not speak to it."""
    found = {}
    in_strings = _string_lines(text)
    for number, line in enumerate(text.splitlines(), 1):
        if _DIRECTIVE.match(line):      # "#!POPCORN leaderboard ..." / "#!POPCORN gpu B200": the CLI's header
            continue
        for code, pattern, message in _COMPILED:
            if code in PYTHON_ONLY and number in in_strings:
                continue
            if task is not None and task not in COMPETITION_ONLY.get(code, (task,)):
                continue
            if pattern.search(line):
                found.setdefault(code, Finding(code, message, [])).lines.append(number)
    return [found[code] for code, _, _ in _COMPILED if code in found]


def scan(path: str, task: str | None = None) -> list[Finding]:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return scan_text(f.read(), task)
    except OSError:
        return []
