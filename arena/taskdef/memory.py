"""Memory, from the trusted parent: how much a case needs (task.yml `memory_bytes`, checked before anything is
generated), how much this machine has, and whether a dead worker was ended by the kernel's out-of-memory killer
(the cgroup's oom_kill counter went up while it ran). Standard library only."""
from __future__ import annotations

import ast
import operator

_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
              ast.FloorDiv: operator.floordiv, ast.Pow: operator.pow}
_FUNCTIONS = {"max": max, "min": min, "sum": sum, "len": len}
OOM_COUNTERS = ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control")


class EstimateError(ValueError):
    """task.yml's `memory_bytes` is not an arithmetic expression of the case's keys."""


def estimate_bytes(expression: str, args: dict) -> float:
    """Evaluate `expression` (+ - * / // **, numbers, the case's keys, max/min/sum/len of lists) on `args`."""
    def value(node):
        if isinstance(node, ast.Expression):
            return value(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.Name) and node.id in args:
            return args[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](value(node.left), value(node.right))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS \
                and len(node.args) == 1 and not node.keywords:
            return _FUNCTIONS[node.func.id](value(node.args[0]))
        raise EstimateError(f"memory_bytes: cannot evaluate {ast.unparse(node)!r} (arithmetic on the case's keys)")
    try:
        tree = ast.parse(str(expression), mode="eval")
    except SyntaxError:
        raise EstimateError(f"memory_bytes: {expression!r} is not an expression") from None
    return float(value(tree))


def available_bytes() -> int | None:
    """MemAvailable of this machine, or None where /proc/meminfo does not say."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def oom_kills() -> int | None:
    """How many processes the kernel's out-of-memory killer has ended in our cgroup, or None if unknown."""
    for path in OOM_COUNTERS:
        try:
            with open(path) as f:
                for line in f:
                    key, _, count = line.partition(" ")
                    if key == "oom_kill":
                        return int(count)
        except (OSError, ValueError):
            continue
    return None


def gib(count: float) -> str:
    return f"{count / 2**30:.1f} GiB"
