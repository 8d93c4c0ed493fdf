"""Finding a submission's CUDA sources without running it, from its syntax tree, for `eval.py compile`.

Every `load_inline(...)` call whose `cuda_sources` are string constants (module-level names, literals, `+`,
`x or DEFAULT`, loops over constants) becomes the translation unit torch makes of it: torch's implicit headers
(unless `no_implicit_headers=True`) in front, the call's own `extra_cuda_cflags` / `extra_include_paths` where
those are constants too, and the archs it is written for (its `// arena: arch` marks, else its flags, else
TORCH_CUDA_ARCH_LIST, else what its code implies). Other module-level strings that hold `__global__` code or
include CUTLASS/CuTe headers are sources as they are. Used by build.py (what to build) and nvcc.py (Source).
"""
from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass, field

from arena.compile.archs import arch_of, implied_targets, marked_archs, split_arch_flags

# What load_inline adds in front of cuda_sources (torch/utils/cpp_extension.py); its nvcc flags are in nvcc.py.
TORCH_IMPLICIT_HEADERS = "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n"
CUTLASS_INCLUDE = re.compile(r'#\s*include\s*[<"](cutlass|cute)/', re.M)


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


MAX_SOURCE_CHARS = 64 << 20      # a constant string longer than this is not a CUDA source


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
            # A name added to itself over and over doubles each time: past any real source, it is not one.
            return left + right if len(left) + len(right) <= MAX_SOURCE_CHARS else None
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



def _is_cuda(text: str) -> bool:
    return "__global__" in text or bool(CUTLASS_INCLUDE.search(text))


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
    targets = marked_archs(text) or archs or env_archs or implied_targets(text)
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
        return _find_in_python(path)
    except SyntaxError as error:
        raise CompileError(f"{path} is not valid Python: line {error.lineno}: {error.msg}") from None
    except (RecursionError, MemoryError):
        raise CompileError(f"{path} is nested too deeply (or too large) to read its CUDA sources") from None


def _find_in_python(path: str) -> list[Source]:
    tree = ast.parse(open(path).read(), filename=path)
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
