"""`eval.py compile`: build a submission's CUDA sources with nvcc, without a GPU, and summarise them.

Sources are found without running the submission, from its syntax tree:
- every `load_inline(...)` call whose `cuda_sources` are string constants (module-level names, literals, `+`,
  `x or DEFAULT`) is built the way torch builds it: torch's implicit headers (unless
  `no_implicit_headers=True`), defines and nvcc flags, torch's and Python's include folders, and the call's
  own `extra_cuda_cflags` / `extra_include_paths` where those are constants too;
- other module-level strings that hold `__global__` code or include CUTLASS/CuTe headers are built as they are.
CUTLASS headers come from CUTLASS_PATH or the `nvidia-cutlass` package. A source is built for the archs it is
written for: its `// arena: arch sm_100a` marks, else the archs in its flags or TORCH_CUDA_ARCH_LIST, else
those its code implies (tcgen05/Sm100 -> sm_100a, wgmma/Sm90 -> sm_90a), else any; for other archs it is
"not targeted", never failed. Per build: ptxas resource usage per kernel and the tensor-core instructions in
the SASS (UTC*MMA on sm_100a, HGMMA on sm_90a), which are required only where the task or `--expect mma` asks.
"""
from __future__ import annotations

import ast
import glob
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections import Counter
from dataclasses import dataclass, field

ARCH_FLAGS = {"sm_90a": "-gencode=arch=compute_90a,code=sm_90a",
              "sm_100a": "-gencode=arch=compute_100a,code=sm_100a"}
MMA_PATTERN = {"sm_90a": re.compile(r"\bHGMMA(\.[\w.]+)?"), "sm_100a": re.compile(r"\bUTC\w*MMA(\.[\w.]+)?")}
MMA_NAME = {"sm_90a": "HGMMA (wgmma)", "sm_100a": "UTC*MMA (tcgen05.mma)"}
CUTLASS_INSTALL = "python3 -m pip install --no-deps nvidia-cutlass==4.2.0.0"
# What load_inline adds in front of cuda_sources, and its nvcc flags (torch/utils/cpp_extension.py).
TORCH_IMPLICIT_HEADERS = "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n"
TORCH_NVCC_FLAGS = ["-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
                    "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__", "--expt-relaxed-constexpr"]
BUILT, NOT_TARGETED, FAILED = "built", "not targeted", "failed"

_ARCH_MARK = re.compile(r"^\s*//\s*arena:\s*arch\s+(sm_\w+)", re.M)
_CUTLASS_INCLUDE = re.compile(r'#\s*include\s*[<"](cutlass|cute)/', re.M)
_TORCH_INCLUDE = re.compile(r'#\s*include\s*[<"](torch|ATen|c10|pybind11)/|#\s*include\s*[<"]Python\.h', re.M)
_SM100_HINT = re.compile(r"tcgen05\.|\bSm10[03]\w*|\bSM10[03]_|__CUDA_ARCH_FEAT_SM10[03]|CUTLASS_ARCH_MMA_SM100")
_SM90_HINT = re.compile(r"wgmma\.|\bSm90\w*|\bSM90_|__CUDA_ARCH_FEAT_SM90|CUTLASS_ARCH_MMA_SM90")
_ARCH_NUMBER = re.compile(r"(?:sm|compute)_(\d+)[af]?")
_PTXAS_FUNCTION = re.compile(r"Compiling entry function '(\w+)' for '(sm_\w+)'")
_PTXAS_USED = re.compile(r"Used (\d+) registers")
_PTXAS_SMEM = re.compile(r"(\d+) bytes smem")
_PTXAS_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


class CompileError(RuntimeError):
    """One line: what could not be built and why."""


@dataclass
class Source:
    """One translation unit as nvcc gets it."""
    name: str
    text: str
    flags: list = field(default_factory=list)        # the source's own nvcc flags, arch flags removed
    includes: list = field(default_factory=list)     # its extra_include_paths
    targets: list | None = None                      # archs it is written for; None: any
    extension: str | None = None                     # load_inline's name: built with torch's defines


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
    status: str
    error: str = ""                                  # failed: why; not targeted: what it targets
    kernels: list = field(default_factory=list)
    mma: Counter = field(default_factory=Counter)

    @property
    def ok(self) -> bool:
        return self.status == BUILT

    @property
    def spills(self) -> int:
        return sum(k.spill_stores + k.spill_loads for k in self.kernels)


# ---- finding the sources ----------------------------------------------------------------------------

def _value(node, known: dict):
    """The value of a constant expression: str, list of str or bool (literals, known names, `+`, lists,
    `a or b`, list()/tuple(), "sep".join(...)); None when it is only known at run time."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, bool)):
        return node.value
    if isinstance(node, ast.Name):
        return known.get(node.id)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _value(node.left, known), _value(node.right, known)
        if isinstance(left, str) and isinstance(right, str) or isinstance(left, list) and isinstance(right, list):
            return left + right
        return None
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [_value(item, known) for item in node.elts]
        return items if all(isinstance(item, str) for item in items) else None
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):     # `flags or DEFAULT`: the default
        values = [_value(item, known) for item in node.values]
        return next((v for v in values if v is not None), None)
    if isinstance(node, ast.Call) and not node.keywords and len(node.args) == 1:
        if isinstance(node.func, ast.Name) and node.func.id in ("list", "tuple"):
            inner = _value(node.args[0], known)
            return inner if isinstance(inner, list) else None
        if isinstance(node.func, ast.Attribute) and node.func.attr == "join":
            sep, items = _value(node.func.value, known), _value(node.args[0], known)
            return sep.join(items) if isinstance(sep, str) and isinstance(items, list) else None
    return None


_PARTIAL = "constant items of "   # known[_PARTIAL + name]: a list with run-time items (f"-I{path}"), those left out


def _constant_items(node, known: dict) -> list[str]:
    """The items of a list expression that are constant strings (a flag list's f"-I{path}" is known only at
    run time; the build still needs the others)."""
    return [v for v in (_value(item, known) for item in node.elts) if isinstance(v, str)]


def _constants(body: list, known: dict) -> dict:
    """Names assigned constant values in `body` (in order), on top of `known`."""
    known = dict(known)
    for node in body:
        target = value = None
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target, value = node.targets[0].id, node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            target, value = node.target.id, node.value
        if target is not None:
            resolved = _value(value, known)
            known.pop(_PARTIAL + target, None)
            if resolved is None:
                known.pop(target, None)
                if isinstance(value, (ast.List, ast.Tuple)):    # flags: keep the constant items
                    known[_PARTIAL + target] = _constant_items(value, known)
            else:
                known[target] = resolved
    return known


def _is_load_inline(call: ast.Call) -> bool:
    func = call.func
    return (isinstance(func, ast.Name) and func.id == "load_inline") or \
        (isinstance(func, ast.Attribute) and func.attr == "load_inline")


def _argument(call: ast.Call, keyword: str, position: int | None):
    for kw in call.keywords:
        if kw.arg == keyword:
            return kw.value
    if position is not None and len(call.args) > position:
        return call.args[position]
    return None


def _names(node, known: dict) -> list[str]:
    """The constant names an expression is built from, for naming a source (`src or CUDA_SM100` -> CUDA_SM100)."""
    return [known.get(_LABEL + n.id, n.id) for n in ast.walk(node) if isinstance(n, ast.Name) and n.id in known]


def arch_of(token: str) -> str | None:
    """sm_90 / compute_90a / 9.0a -> sm_90a; 100, 100a, 100f -> sm_100a; others sm_<n>."""
    match = _ARCH_NUMBER.search(token) or re.fullmatch(r"(\d+)\.(\d+)[af]?(\+PTX)?", token.strip())
    if not match:
        return None
    number = match.group(1) if match.re is _ARCH_NUMBER else match.group(1) + match.group(2)
    arch = f"sm_{number}a"
    return arch if arch in ARCH_FLAGS else f"sm_{number}"


def split_arch_flags(flags: list[str]) -> tuple[list[str], list[str]]:
    """(archs the flags name, the flags without them): -gencode / --generate-code / -arch / -code, with
    `=` or as two tokens. `-arch=native` names none."""
    archs, rest, i = [], [], 0
    option = re.compile(r"^(-gencode|--generate-code|-arch|--gpu-architecture|-code|--gpu-code)(=(.*))?$")
    while i < len(flags):
        match = option.match(flags[i].strip())
        if not match:
            rest.append(flags[i])
            i += 1
            continue
        value = match.group(3)
        if value is None and i + 1 < len(flags):
            value, i = flags[i + 1], i + 1
        i += 1
        for token in re.findall(r"(?:sm|compute)_\d+[af]?", value or ""):
            arch = arch_of(token)
            if arch and arch not in archs:
                archs.append(arch)
    return archs, rest


def _env_arch_list(tree) -> list[str] | None:
    """Archs from `os.environ["TORCH_CUDA_ARCH_LIST"] = "10.0a"` (or setdefault) anywhere in the file."""
    for node in ast.walk(tree):
        value = None
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Subscript):
            key = node.targets[0].slice
            if isinstance(key, ast.Constant) and key.value == "TORCH_CUDA_ARCH_LIST":
                value = _value(node.value, {})
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "setdefault" \
                and len(node.args) == 2 and isinstance(node.args[0], ast.Constant) \
                and node.args[0].value == "TORCH_CUDA_ARCH_LIST":
            value = _value(node.args[1], {})
        if isinstance(value, str):
            archs = [arch_of(part) for part in re.split(r"[;\s,]+", value) if part]
            return [a for a in dict.fromkeys(archs) if a] or None
    return None


def implied_targets(text: str) -> list[str] | None:
    """The archs a source's own code implies: its `// arena: arch` marks, else tcgen05 / Sm100 -> sm_100a and
    wgmma / Sm90 -> sm_90a (those only build there, or are guarded for there), else None (any)."""
    marks = _ARCH_MARK.findall(text)
    if marks:
        return marks
    found = [arch for arch, hint in (("sm_90a", _SM90_HINT), ("sm_100a", _SM100_HINT)) if hint.search(text)]
    return found or None


def target_archs(text: str) -> list[str] | None:
    """Kept for callers that have only the text (see implied_targets)."""
    return implied_targets(text)


def _is_cuda(text: str) -> bool:
    return "__global__" in text or bool(_CUTLASS_INCLUDE.search(text))


def _load_inline_source(call: ast.Call, node, known: dict, env_archs, folder: str) -> Source | None:
    """The translation unit torch's load_inline makes of this call, or None if its sources are made at run time."""
    value = _value(node, known)
    if value is None:
        return None
    parts = [value] if isinstance(value, str) else value

    def constant(keyword, default, position=None):
        given = _argument(call, keyword, position)
        resolved = _value(given, known) if given is not None else None
        return default if resolved is None else resolved

    def listed(keyword):
        given = _argument(call, keyword, None)
        if isinstance(given, ast.Name) and given.id not in known and _PARTIAL + given.id in known:
            return list(known[_PARTIAL + given.id])
        if isinstance(given, (ast.List, ast.Tuple)):
            return _constant_items(given, known)
        value = constant(keyword, [])
        return [value] if isinstance(value, str) else list(value)

    archs, flags = split_arch_flags(listed("extra_cuda_cflags"))
    includes = [p if os.path.isabs(p) else os.path.join(folder, p) for p in listed("extra_include_paths")]
    name = constant("name", "", 0)
    name = name if isinstance(name, str) and name else "extension"
    text = ("" if constant("no_implicit_headers", False) is True else TORCH_IMPLICIT_HEADERS) + "\n".join(parts)
    label = "+".join(dict.fromkeys(_names(node, known))) or f"load_inline@{call.lineno}"
    targets = _ARCH_MARK.findall(text) or archs or env_archs or implied_targets(text)
    return Source(label, text, flags=flags, includes=includes, targets=targets, extension=name)


_LABEL = "label of "     # known[_LABEL + name]: what a loop variable stands for, to name its source


def _loop_bindings(loop: ast.For, known: dict) -> list[dict]:
    """`known` once per item of a loop over constants (`for x in [A, B]`, `for i, x in enumerate([A, B])`), with
    the loop variable bound; `known` alone when the items are only known at run time."""
    items, target = loop.iter, loop.target
    if isinstance(items, ast.Call) and isinstance(items.func, ast.Name) and items.func.id == "enumerate" \
            and items.args and isinstance(target, ast.Tuple) and len(target.elts) == 2:
        items, target = items.args[0], target.elts[1]
    if not isinstance(target, ast.Name) or not isinstance(items, (ast.List, ast.Tuple)):
        return [known]
    values = [_value(item, known) for item in items.elts]
    if any(value is None for value in values):
        return [known]
    labels = [item.id if isinstance(item, ast.Name) else f"{target.id}[{i}]" for i, item in enumerate(items.elts)]
    return [{**known, target.id: value, _LABEL + target.id: label} for value, label in zip(values, labels)]


def find_sources(path: str) -> list[Source]:
    """The CUDA sources of a submission (.py) or one .cu file, as nvcc will get them."""
    if path.endswith(".cu"):
        text = open(path).read()
        return [Source(os.path.splitext(os.path.basename(path))[0], text, targets=implied_targets(text))]
    try:
        tree = ast.parse(open(path).read(), filename=path)
    except SyntaxError as error:
        raise CompileError(f"{path} is not valid Python: line {error.lineno}: {error.msg}") from None
    module = _constants(tree.body, {})
    env_archs = _env_arch_list(tree)
    folder = os.path.dirname(os.path.abspath(path))
    calls = {id(c): (c, [module]) for c in ast.walk(tree) if isinstance(c, ast.Call) and _is_load_inline(c)}
    for function in ast.walk(tree):     # outer functions first: a call gets its innermost function's names
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            local = _constants(list(ast.walk(function))[1:], module)
            for node in ast.walk(function):
                if id(node) in calls:
                    calls[id(node)] = (node, [local])
    for loop in ast.walk(tree):         # `for src in [V4, V3]: load_inline(cuda_sources=COMMON + src)`: one each
        if isinstance(loop, ast.For):
            for node in ast.walk(loop):
                if id(node) in calls:
                    call, knowns = calls[id(node)]
                    calls[id(node)] = (call, [bound for known in knowns for bound in _loop_bindings(loop, known)])
    sources, claimed, unresolved = {}, set(), []
    for call, known in ((call, known) for call, knowns in calls.values() for known in knowns):
        node = _argument(call, "cuda_sources", 2)
        if node is None:
            continue
        source = _load_inline_source(call, node, known, env_archs, folder)
        if source is None:
            unresolved.append(call.lineno)
            continue
        claimed.update(_names(node, known))
        sources.setdefault((source.text, tuple(source.flags), tuple(source.includes)), source)
    for name, value in module.items():
        if isinstance(value, str) and name not in claimed and _is_cuda(value) \
                and not any(value in source.text for source in sources.values()):
            sources[(value, (), ())] = Source(name, value, targets=implied_targets(value))
    if not sources:
        if unresolved:
            raise CompileError(f"{path} calls load_inline (line {unresolved[0]}) with cuda_sources made at run "
                               f"time; compile builds sources that are string constants")
        raise CompileError(f"{path} has no CUDA source: no load_inline call with constant cuda_sources and no "
                           f"module-level string with __global__ code or CUTLASS includes")
    return list(sources.values())


def cuda_sources(path: str) -> dict[str, str]:
    """name -> text of every source find_sources sees."""
    return {s.name: s.text for s in find_sources(path)}


# ---- building -----------------------------------------------------------------------------------------

def find_tool(name: str) -> str | None:
    """A CUDA tool (nvcc, cuobjdump, nvdisasm, ...): on PATH, in $CUDA_HOME or /usr/local/cuda, or the copy a
    PyPI nvidia-cuda-* package installs. The one finder of the project (tests and bench use it too)."""
    found = shutil.which(name)
    if found:
        return found
    homes = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    candidates = [os.path.join(home, "bin", name) for home in homes if home]
    for root in sys.path:
        candidates += sorted(glob.glob(os.path.join(root, "nvidia", "*", "bin", name)))
    return next((c for c in candidates if os.path.isfile(c) and os.access(c, os.X_OK)), None)


def cutlass_include_dirs() -> list[str] | None:
    """CUTLASS's include folders: $CUTLASS_PATH (a CUTLASS checkout), else the nvidia-cutlass package's copy."""
    root = os.environ.get("CUTLASS_PATH")
    if not root:
        spec = importlib.util.find_spec("cutlass_library")
        if spec is None or not spec.submodule_search_locations:
            return None
        root = os.path.join(list(spec.submodule_search_locations)[0], "source")
    found = [d for d in (os.path.join(root, "include"), os.path.join(root, "tools", "util", "include"))
             if os.path.isdir(d)]
    return found or None


def _system_includes(source: Source) -> list[str] | str:
    """-isystem folders the source needs (torch, Python, CUTLASS), or a one-line reason it cannot build."""
    folders = []
    if source.extension or _TORCH_INCLUDE.search(source.text):
        try:
            from torch.utils.cpp_extension import include_paths
            folders += include_paths()
        except Exception:               # torch missing: let nvcc name the header it cannot find
            pass
        python = sysconfig.get_path("include", scheme="posix_prefix")
        if python:
            folders.append(python)
    if _CUTLASS_INCLUDE.search(source.text):
        cutlass = cutlass_include_dirs()
        if cutlass is None:
            return f"includes CUTLASS headers, which are not installed: {CUTLASS_INSTALL} (or set CUTLASS_PATH)"
        folders += cutlass
    return [flag for folder in folders for flag in ("-isystem", folder)]


def nvcc_command(nvcc: str, source: Source, arch: str, path: str, cubin: str, system: list[str]) -> list[str]:
    command = [nvcc, ARCH_FLAGS[arch], "-cubin", "-Xptxas", "-v", "-lineinfo"]
    if source.extension:
        command += [f"-DTORCH_EXTENSION_NAME={source.extension}", "-DTORCH_API_INCLUDE_EXTENSION_H",
                    *TORCH_NVCC_FLAGS]
    own = list(source.flags)
    if not any(flag.startswith("-O") for flag in own):
        command.append("-O3")
    if not any(flag.startswith(("-std", "--std")) for flag in own):
        command.append("-std=c++17")
    command += [f"-I{p}" for p in source.includes] + system + own
    return command + ["-o", cubin, path]


EMULATED = "sm_100a emulated"     # an sm_100a build through --emulate-blackwell's toolchain: an sm_90a image


def _emulation_toolchain() -> tuple[str, dict]:
    """The nvcc (and environment) that builds sm_100a code into an sm_90a image whose tcgen05 is software."""
    from arena.blackwell.toolchain import ToolchainError, prepare
    try:
        env = prepare()
    except ToolchainError as error:
        raise CompileError(f"emulate-blackwell: {error}") from None
    return env["PYTORCH_NVCC"], {**os.environ, **env}


def build(source: Source, arch: str, workdir: str) -> Build:
    env = None
    if arch == EMULATED:
        nvcc, env = _emulation_toolchain()
    else:
        nvcc = find_tool("nvcc")
    if nvcc is None:
        raise CompileError("nvcc not found on PATH: install the CUDA toolkit to use `eval.py compile`")
    system = _system_includes(source)
    if isinstance(system, str):
        return Build(source.name, arch, FAILED, error=system)
    stem = re.sub(r"\W", "_", source.name)
    path = os.path.join(workdir, f"{stem}.cu")
    cubin = os.path.join(workdir, f"{stem}.{arch.replace(' ', '_')}.cubin")
    with open(path, "w") as f:
        f.write(source.text)
    target = "sm_100a" if arch == EMULATED else arch
    proc = subprocess.run(nvcc_command(nvcc, source, target, path, cubin, system), capture_output=True, text=True,
                          env=env)
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        errors = [line for line in lines if "emulate-blackwell:" in line] or [line for line in lines if "error" in line]
        error = (errors[0] if errors else lines[-1] if lines else "nvcc failed").replace(path, f"{stem}.cu")
        return Build(source.name, arch, FAILED, error=error)
    if arch == EMULATED:            # tcgen05 became library calls: no tensor-core instruction to count
        return Build(source.name, arch, BUILT, kernels=_parse_ptxas(proc.stderr))
    return Build(source.name, arch, BUILT, kernels=_parse_ptxas(proc.stderr), mma=_count_mma(cubin, arch))


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


def compile_submission(path: str, archs, step=None) -> list[Build]:
    """One Build per source and arch: built, failed, or not targeted (not built: the source is not for it).
    `step(text)`, if given, hears each build as it begins (eval.py's progress)."""
    if isinstance(archs, str):
        archs = [archs]
    sources = find_sources(path)
    builds = []
    with tempfile.TemporaryDirectory(prefix="arena-compile-") as workdir:
        for arch in archs:
            for source in sources:
                if source.targets is not None and arch.split()[0] not in source.targets:
                    builds.append(Build(source.name, arch, NOT_TARGETED, error=f"targets {', '.join(source.targets)}"))
                else:
                    if step is not None:
                        step(f"building {source.name} for {arch} with nvcc")
                    builds.append(build(source, arch, workdir))
    return builds


# ---- judging and reporting ---------------------------------------------------------------------------

def problems(builds: list[Build], expect_mma: bool) -> list[str]:
    """One line per problem: a failed build, spills, no arch built at all, and (when tensor-core MMA is
    expected) an arch whose builds hold no MMA instruction at all (a CUDA-core epilogue beside an MMA kernel
    is fine)."""
    out = [f"{b.source} ({b.arch}) does not compile: {b.error}" for b in builds if b.status == FAILED]
    out += [f"{b.source} ({b.arch}): {b.spills} bytes of register spills" for b in builds
            if b.ok and b.spills and b.arch != EMULATED]        # emulated code is not the code that runs on a B200
    if not any(b.ok or b.status == FAILED for b in builds):
        archs = ", ".join(dict.fromkeys(b.arch for b in builds))
        told = "; ".join(dict.fromkeys(f"{b.source} {b.error}" for b in builds))
        out.append(f"none of the sources is for {archs} ({told})")
    if expect_mma:
        for arch in dict.fromkeys(b.arch for b in builds if b.arch != EMULATED):
            built = [b for b in builds if b.arch == arch and b.ok]
            if built and not any(b.mma for b in built):
                out += [f"{b.source} ({arch}): no {MMA_NAME[arch]} instruction in the SASS" for b in built]
    return out


def summary(builds: list[Build]) -> list[str]:
    """Per arch: how many sources were built, not targeted, failed."""
    lines = []
    for arch in dict.fromkeys(b.arch for b in builds):
        counts = Counter(b.status for b in builds if b.arch == arch)
        lines.append(f"{arch}: " + ", ".join(f"{counts[s]} {s}" for s in (BUILT, NOT_TARGETED, FAILED) if counts[s]))
    return lines


def render(console, builds: list[Build]):
    from rich.table import Table
    from rich.markup import escape
    table = Table(show_header=True, header_style="bold")
    for column in ("source", "arch", "status", "kernel", "regs", "smem B", "stack B", "spills B",
                   "tensor-core instructions"):
        table.add_column(column)
    for b in builds:
        if not b.ok:
            colour = "red" if b.status == FAILED else "dim"
            table.add_row(b.source, b.arch, f"[{colour}]{b.status}[/{colour}]", f"[{colour}]{escape(b.error)}[/{colour}]",
                          "", "", "", "", "")
            continue
        mma = ", ".join(f"{op} x{n}" for op, n in sorted(b.mma.items())) or "none"
        for i, k in enumerate(b.kernels or [KernelUsage("?")]):
            first = i == 0
            table.add_row(b.source if first else "", b.arch if first else "", BUILT if first else "", k.name,
                          str(k.registers), str(k.smem), str(k.stack), str(k.spill_stores + k.spill_loads),
                          mma if first else "")
    console.print(table)


def report(console, builds: list[Build], expect_mma: bool) -> bool:
    """The table, one line per arch, one per problem; True when there is none."""
    render(console, builds)
    found = problems(builds, expect_mma)
    for line in summary(builds):
        console.print(line, markup=False, highlight=False)
    for problem in found:
        console.print(f"✘ {problem}", style="red", markup=False, highlight=False, soft_wrap=True)   # one line each
    if not found:
        rule = "tensor-core instructions present, " if expect_mma and any(b.arch != EMULATED for b in builds) else ""
        console.print(f"✔ {sum(b.ok for b in builds)} build(s): {rule}no spills", style="green", markup=False)
    return not found
