"""Judging builds and reporting them for `eval.py compile`: a failed build, register spills, no arch built, or
(where the task or `--expect mma` asks) an arch without tensor-core instructions is a problem; the table, one
line per arch and one per problem. Used by eval.py (report); problems is also what tests check.
"""
from __future__ import annotations

from collections import Counter

from arena.compile.archs import EMULATED, MMA_NAME
from arena.compile.build import BUILT, FAILED, NOT_TARGETED, Build, KernelUsage


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
    """One row per kernel of a build, one per build that was not built (failed: why; not targeted: for what)."""
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
