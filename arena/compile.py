"""`eval.py compile`: build a submission's CUDA sources with nvcc, without a GPU, and summarise them.

The CUDA sources are found without running the submission: module-level string constants (and `+` of
such constants) that contain `__global__`. A source may name its targets with a line
`// arena: arch sm_100a` (several allowed); unmarked sources are built for the arch whose PTX they use
(tcgen05 -> sm_100a, wgmma -> sm_90a), or for whatever arch is asked.
For each build: ptxas resource usage per kernel (registers, shared memory, stack, spills) and counts of
the tensor-core instructions in the SASS (UTC*MMA on sm_100a, HGMMA on sm_90a).
"""
from __future__ import annotations

import ast
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field

ARCH_FLAGS = {"sm_90a": "-gencode=arch=compute_90a,code=sm_90a",
              "sm_100a": "-gencode=arch=compute_100a,code=sm_100a"}
MMA_PATTERN = {"sm_90a": re.compile(r"\bHGMMA(\.[\w.]+)?"), "sm_100a": re.compile(r"\bUTC\w*MMA(\.[\w.]+)?")}
_ARCH_MARK = re.compile(r"^\s*//\s*arena:\s*arch\s+(sm_\w+)", re.M)
_PTXAS_FUNCTION = re.compile(r"Compiling entry function '(\w+)' for '(sm_\w+)'")
_PTXAS_USED = re.compile(r"Used (\d+) registers")
_PTXAS_SMEM = re.compile(r"(\d+) bytes smem")
_PTXAS_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


class CompileError(RuntimeError):
    """One line: what could not be built and why."""


@dataclass
class KernelUsage:
    name: str
    registers: int = 0
    smem: int = 0
    stack: int = 0
    spill_stores: int = 0
    spill_loads: int = 0


@dataclass
class Build:
    source: str
    arch: str
    ok: bool
    error: str = ""
    kernels: list = field(default_factory=list)
    mma: Counter = field(default_factory=Counter)

    @property
    def spills(self) -> int:
        return sum(k.spill_stores + k.spill_loads for k in self.kernels)

    def problems(self) -> list[str]:
        if not self.ok:
            return [f"{self.source} ({self.arch}) does not compile: {self.error}"]
        out = []
        if not self.mma:
            wanted = "UTC*MMA (tcgen05.mma)" if self.arch == "sm_100a" else "HGMMA (wgmma)"
            out.append(f"{self.source} ({self.arch}): no {wanted} instruction in the SASS")
        if self.spills:
            out.append(f"{self.source} ({self.arch}): {self.spills} bytes of register spills")
        return out


def cuda_sources(path: str) -> dict[str, str]:
    """Module-level string constants of a Python file that hold CUDA kernels (name -> text).
    A .cu file is one source as it is."""
    if path.endswith(".cu"):
        return {os.path.splitext(os.path.basename(path))[0]: open(path).read()}
    try:
        tree = ast.parse(open(path).read(), filename=path)
    except SyntaxError as error:
        raise CompileError(f"{path} is not valid Python: line {error.lineno}: {error.msg}") from None
    strings: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = _string_value(node.value, strings)
            if value is not None:
                strings[node.targets[0].id] = value
    return {name: text for name, text in strings.items() if "__global__" in text}


def _string_value(node, known: dict):
    """The value of a constant-string expression (literals, known names, `+`), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return known.get(node.id)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _string_value(node.left, known), _string_value(node.right, known)
        return left + right if left is not None and right is not None else None
    return None


def target_archs(text: str) -> list[str] | None:
    """The archs a source is meant for: its `// arena: arch` marks, else guessed from the PTX it uses
    (tcgen05.* only assembles for sm_100a, wgmma.* for sm_90a), else None (any)."""
    marks = _ARCH_MARK.findall(text)
    if marks:
        return marks
    if "tcgen05." in text:
        return ["sm_100a"]
    if "wgmma." in text:
        return ["sm_90a"]
    return None


def find_tool(name: str) -> str | None:
    """nvcc's sibling tools, or the copies that PyPI's nvidia-cuda-* packages install."""
    found = shutil.which(name)
    if found:
        return found
    for root in sys.path:
        for candidate in glob.glob(os.path.join(root, "nvidia", "cu*", "bin", name)):
            if os.access(candidate, os.X_OK):
                return candidate
    return None


def _torch_includes(text: str) -> list[str]:
    if "torch/" not in text and "ATen/" not in text:
        return []
    try:
        from torch.utils.cpp_extension import include_paths
        return [f"-I{p}" for p in include_paths()]
    except Exception:
        return []


def build(name: str, text: str, arch: str, workdir: str) -> Build:
    nvcc = find_tool("nvcc")
    if nvcc is None:
        raise CompileError("nvcc not found on PATH: install the CUDA toolkit to use `eval.py compile`")
    source = os.path.join(workdir, f"{name}.cu")
    cubin = os.path.join(workdir, f"{name}.{arch}.cubin")
    with open(source, "w") as f:
        f.write(text)
    command = [nvcc, ARCH_FLAGS[arch], "-O3", "-std=c++17", "-cubin", "-Xptxas", "-v", "-lineinfo",
               *_torch_includes(text), "-o", cubin, source]
    proc = subprocess.run(command, capture_output=True, text=True)
    result = Build(source=name, arch=arch, ok=proc.returncode == 0)
    if not result.ok:
        lines = proc.stderr.strip().splitlines()
        errors = [line for line in lines if "error" in line]
        result.error = (errors[0] if errors else lines[-1] if lines else "nvcc failed").replace(source, f"{name}.cu")
        return result
    result.kernels = _parse_ptxas(proc.stderr)
    result.mma = _count_mma(cubin, arch)
    return result


def _parse_ptxas(log: str) -> list[KernelUsage]:
    kernels, current = [], None
    for line in log.splitlines():
        entry = _PTXAS_FUNCTION.search(line)
        if entry:
            current = KernelUsage(entry.group(1))
            kernels.append(current)
            continue
        if current is None:
            continue
        frame = _PTXAS_FRAME.search(line)
        if frame:
            current.stack, current.spill_stores, current.spill_loads = map(int, frame.groups())
        used = _PTXAS_USED.search(line)
        if used:
            current.registers = int(used.group(1))
            smem = _PTXAS_SMEM.search(line)
            current.smem = int(smem.group(1)) if smem else 0
    return kernels


def _count_mma(cubin: str, arch: str) -> Counter:
    cuobjdump = find_tool("cuobjdump")
    if cuobjdump is None:
        raise CompileError("cuobjdump not found: `pip install nvidia-cuda-cuobjdump` (or use the CUDA toolkit's)")
    proc = subprocess.run([cuobjdump, "-sass", cubin], capture_output=True, text=True)
    if proc.returncode != 0:
        raise CompileError(f"cuobjdump could not read the {arch} build: {proc.stderr.strip()[:200]}")
    return Counter(m.group(0) for m in MMA_PATTERN[arch].finditer(proc.stdout))


def compile_submission(path: str, arch: str) -> list[Build]:
    sources = cuda_sources(path)
    if not sources:
        raise CompileError(f"{path} has no module-level CUDA source string (a string constant holding "
                           f"__global__ code); its sources may be built at run time")
    chosen = {n: t for n, t in sources.items() if (target_archs(t) is None or arch in target_archs(t))}
    if not chosen:
        raise CompileError(f"none of the CUDA sources in {path} ({', '.join(sources)}) targets {arch}")
    with tempfile.TemporaryDirectory(prefix="arena-compile-") as workdir:
        return [build(name, text, arch, workdir) for name, text in chosen.items()]


def render(console, builds: list[Build]):
    from rich.table import Table
    table = Table(show_header=True, header_style="bold")
    for column in ("source", "arch", "kernel", "regs", "smem B", "stack B", "spills B", "tensor-core instructions"):
        table.add_column(column)
    for b in builds:
        if not b.ok:
            table.add_row(b.source, b.arch, f"[red]{b.error}[/red]", "", "", "", "", "")
            continue
        mma = ", ".join(f"{op} x{n}" for op, n in sorted(b.mma.items())) or "[red]none[/red]"
        for i, k in enumerate(b.kernels or [KernelUsage("?")]):
            table.add_row(b.source if i == 0 else "", b.arch if i == 0 else "", k.name, str(k.registers),
                          str(k.smem), str(k.stack), str(k.spill_stores + k.spill_loads), mma if i == 0 else "")
    console.print(table)
