"""Building one source for one arch, and what a build shows: ptxas's resource usage per kernel and the
tensor-core instructions in its SASS. nvcc runs in a jail (arena/isolation/jail.py run_jailed) because a source's
flags reach /bin/sh there. Used by eval.py (compile_submission) and verdict.py (the Build it judges).
"""
from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field

from arena.isolation import jail, worker_text
from arena.compile.archs import EMULATED, MMA_PATTERN
from arena.compile.diagnosis import build_failure
from arena.compile.nvcc import compiler, disassembler, nvcc_command, system_includes
from arena.compile.sources import CompileError, Source, find_sources

BUILT, NOT_TARGETED, FAILED = "built", "not targeted", "failed"

_PTXAS_FUNCTION = re.compile(r"Compiling entry function '(\w+)' for '(sm_\w+)'")
_PTXAS_USED = re.compile(r"Used (\d+) registers")
_PTXAS_SMEM = re.compile(r"(\d+) bytes smem")
_PTXAS_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


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


def build(source: Source, arch: str) -> Build:
    """Build one source for one arch in a jail (arena/isolation/jail.py run_jailed): its flags reach nvcc, which runs
    its steps through /bin/sh, so a flag like `-DX=$(cmd)` runs `cmd` there, never in the evaluator."""
    nvcc, env = compiler(arch)
    system = system_includes(source)
    if isinstance(system, str):
        return Build(source.name, arch, FAILED, error=system)
    cuobjdump = disassembler(arch)
    stem = re.sub(r"\W", "_", source.name)
    path, cubin = f"{stem}.cu", f"{stem}.{arch.replace(' ', '_')}.cubin"
    target = "sm_100a" if arch == EMULATED else arch
    commands = [nvcc_command(nvcc, source, target, path, cubin, system)]
    if cuobjdump:
        commands.append([cuobjdump, "-sass", cubin])
    tools = [os.path.dirname(os.path.realpath(t)) for t in (nvcc, cuobjdump) if t]
    readable = tools + list(source.includes) + [p[2:] for p in system if p.startswith("-I")]
    if env:             # the emulation toolchain's folder (its nvcc shim, the library) and CUDA toolkit
        readable += [v for k, v in env.items() if k.startswith("NVFP4EMU_") and os.path.isabs(v)]
    done, _ = jail.run_jailed(commands, f"compile:{source.text}", {path: source.text}, readable, env)
    compiled = done[0]
    if compiled.returncode != 0:
        error = build_failure(compiled.stderr + compiled.stdout)
        return Build(source.name, arch, FAILED, error=worker_text.clean_text(error, 600))
    if arch == EMULATED:            # tcgen05 became library calls: no tensor-core instruction to count
        return Build(source.name, arch, BUILT, kernels=parse_ptxas(compiled.stderr))
    if len(done) < 2 or done[1].returncode != 0:
        said = done[1].stderr.strip()[:200] if len(done) > 1 else "not run"
        raise CompileError(f"cuobjdump could not read the {arch} build: {worker_text.clean_text(said, 200)}")
    return Build(source.name, arch, BUILT, kernels=parse_ptxas(compiled.stderr),
                 mma=Counter(m.group(0) for m in MMA_PATTERN[arch].finditer(done[1].stdout)))


def parse_ptxas(log: str) -> list[KernelUsage]:
    """Each kernel's registers, shared memory, stack and spills, from nvcc's `-Xptxas -v` log."""
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


def compile_submission(path: str, archs, step=None) -> list[Build]:
    """One Build per source and arch: built, failed, or not targeted (not built: the source is not for it).
    `step(text)`, if given, hears each build as it begins (eval.py's progress)."""
    if isinstance(archs, str):
        archs = [archs]
    sources = find_sources(path)
    builds = []
    for arch in archs:
        for source in sources:
            if source.targets is not None and arch.split()[0] not in source.targets:
                builds.append(Build(source.name, arch, NOT_TARGETED, error=f"targets {', '.join(source.targets)}"))
            else:
                if step is not None:
                    step(f"building {source.name} for {arch} with nvcc")
                builds.append(build(source, arch))
    return builds
