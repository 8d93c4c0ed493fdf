"""The three programs `--emulate-blackwell` puts in front of the CUDA toolchain (arena/blackwell/toolchain.py
writes one-line scripts that run `python3 shims.py TOOL ARGS...`):

- nvcc: drops the build's own GPU-architecture flags, compiles device code for compute_100a (so
  `__CUDA_ARCH__` and the feature macros are Blackwell's), force-includes emulation_host.h (and
  emulation_cublaslt.h into a source that calls cuBLASLt), and runs the real
  nvcc through a private nvcc.profile whose PATH puts the two shims below first;
- ptxas: for an sm_100-family target, rewrites the PTX (ptx_rewrite.py) and assembles it for sm_90a: alone and
  linked with the library's cubin (nvcc's modules), or with the library merged into it;
- fatbinary: labels the rewritten sm_90a images as such and drops Blackwell PTX images.
Failures print one line starting with "emulate-blackwell:" and exit 1.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))

from arena.blackwell import shared_window, toolchain  # noqa: E402
from arena.blackwell.ptx_rewrite import CannotEmulate, register_cap, rewrite  # noqa: E402

_BLACKWELL = re.compile(r"sm_1[0-2]\d[af]?$")
_ARCH_FLAG = re.compile(r"^(-gencode|--generate-code|-arch|--gpu-architecture|-code|--gpu-code)(=.*)?$")


def fail(message: str) -> int:
    print(f"emulate-blackwell: {message}", file=sys.stderr)
    return 1


def nvcc(args: list[str]) -> int:
    kept, skip = [], False
    for arg in args:
        if skip:
            skip = False
            continue
        m = _ARCH_FLAG.match(arg)
        if m:
            skip = m.group(2) is None      # the value is the next argument
            continue
        kept.append(arg)
    work = toolchain.workdir()
    out = kept[kept.index("-o") + 1] if "-o" in kept[:-1] else None
    env = dict(os.environ)
    if out:
        env[toolchain.SITES_ENV] = os.path.abspath(out) + ".emu.json"
    env[toolchain.LINK_ENV] = "1"
    headers = ["-include", toolchain.host_header()]
    if any(_names_cublaslt(arg) for arg in kept):
        headers += ["-include", toolchain.CUBLASLT_HEADER]
    command = [toolchain.private_nvcc(work), "-gencode=arch=compute_100a,code=sm_100a"] + headers + kept
    return subprocess.call(command, env=env)


def _names_cublaslt(arg: str) -> bool:
    """A CUDA source among nvcc's arguments that calls cuBLASLt: it gets emulation_cublaslt.h, whose wrappers run
    cuBLASLt's block-scaled FP4 matmul, which a Hopper GPU's cuBLASLt refuses."""
    if arg.startswith("-") or not arg.endswith((".cu", ".cuh")) or not os.path.isfile(arg):
        return False
    with open(arg, errors="replace") as f:
        return "cublasLt" in f.read()


def _arch_positions(args: list[str]) -> list[tuple[int, str]]:
    """(index, value) of every target-architecture setting: nvcc's own `-arch=` and any `--gpu-name` a build
    passes through --ptxas-options (ptxas keeps the last one)."""
    found = []
    for i, arg in enumerate(args):
        for prefix in ("-arch=", "--gpu-name=", "-arch", "--gpu-name"):
            if prefix.endswith("=") and arg.startswith(prefix):
                found.append((i, arg.split("=", 1)[1]))
                break
            if arg == prefix and i + 1 < len(args):
                found.append((i + 1, args[i + 1]))
                break
    return found


def _retarget(arg: str) -> str:
    return arg.split("=", 1)[0] + "=sm_90a" if "=" in arg else "sm_90a"


def ptxas(args: list[str]) -> int:
    real = toolchain.real_tool("ptxas")
    archs = _arch_positions(args)
    if not archs or not _BLACKWELL.match(archs[-1][1]):
        return subprocess.call([real] + args)
    sources = [i for i, a in enumerate(args) if a.endswith(".ptx")]
    if len(sources) != 1:
        return fail(f"ptxas was given {len(sources)} PTX files; expected one")
    source = args[sources[0]]
    rejected = _blackwell_ptxas_rejects(real, args)
    if rejected:
        return fail(rejected)
    with open(source) as f:
        text = f.read()
    # A CUDA source's module (built through the nvcc shim) is assembled alone and linked with the library's cubin
    # (assembled once per register cap) instead of reassembling the library with every module; the library is
    # merged into the module's text where the build asks for relocatable code (-c: nvcc -rdc), where the module
    # uses an over-aligned dynamic shared window in a form shared_window cannot round, for Triton modules (the
    # nvcc shim and CuTe DSL's hook ask for the link), and where assembling alone or linking fails (the merged
    # build then gives ptxas's own verdict).
    relocatable = any(a in ("-c", "--compile-only") for a in args)
    windowed = None
    if os.environ.get(toolchain.LINK_ENV) == "1" and not relocatable:
        windowed = shared_window.align_window_references(text)
    if windowed is not None:
        try:
            new, sites = rewrite(windowed, toolchain.library_ptx(), linked=True)
        except CannotEmulate as error:
            return fail(f"cannot emulate {error}")
        why = _assemble_and_link(real, _rewritten_args(args, archs, sources[0], new, sites), new)
        if why is None:
            return 0
        # not an "emulate-blackwell:" line: those name why a build failed, and the merged build may still succeed
        print(f"note: the linked emulation build did not work ({why}); the library is merged instead", file=sys.stderr)
    try:
        new, sites = rewrite(text, toolchain.library_ptx())
    except CannotEmulate as error:
        return fail(f"cannot emulate {error}")
    done = subprocess.run([real] + _rewritten_args(args, archs, sources[0], new, sites), capture_output=True,
                          text=True)
    sys.stdout.write(done.stdout)
    if done.returncode != 0:
        return fail(explain_ptxas_error(done.stderr, new))
    sys.stderr.write(done.stderr)
    return 0


def _rewritten_args(args: list[str], archs: list[tuple[int, str]], at: int, ptx: str, sites) -> list[str]:
    """ptxas's arguments for the rewritten module (written beside the source, its call sites where the nvcc
    shim asked), retargeted to sm_90a."""
    source = args[at]
    rewritten = source + ".sm90a.ptx"
    with open(rewritten, "w") as f:
        f.write(ptx)
    sites_file = os.environ.get(toolchain.SITES_ENV)
    if sites_file:
        with open(sites_file, "w") as f:
            json.dump([{"site": s.number, "line": s.line, "instruction": s.instruction} for s in sites], f)
    args = list(args)
    args[at] = rewritten
    for position, _ in archs:
        args[position] = _retarget(args[position])
    return args


def _output_position(args: list[str]) -> int | None:
    for i, arg in enumerate(args[:-1]):
        if arg in ("-o", "--output-file"):
            return i + 1
    return None


def _assemble_and_link(real: str, args: list[str], ptx: str) -> str | None:
    """ptxas -c on the rewritten module, then nvlink with the library's cubin into the output ptxas was asked
    for; None when done, else why not (one line). ptxas's -v report is passed on with each kernel's registers as
    linked (its own and the library's)."""
    at = _output_position(args)
    output = args[at] if at is not None else "elf.o"        # ptxas's own default
    relocatable = output + ".emu.o"
    args = list(args)
    if at is None:
        args += ["-o", relocatable]
    else:
        args[at] = relocatable
    done = subprocess.run([real, "-c"] + args, capture_output=True, text=True)
    if done.returncode != 0:
        return f"ptxas -c failed: {explain_ptxas_error(done.stderr, ptx)}"
    try:
        library = toolchain.library_cubin(register_cap(ptx, args))
        linked = subprocess.run([toolchain.real_tool("nvlink"), "-v", "-arch=sm_90a", relocatable, library,
                                 "-o", output], capture_output=True, text=True)
    except toolchain.ToolchainError as error:
        return str(error)
    finally:
        os.remove(relocatable)
    if linked.returncode != 0:
        lines = [x.strip() for x in (linked.stderr + linked.stdout).splitlines() if "error" in x.lower()]
        return f"nvlink of the emulation library failed: {lines[0] if lines else 'no message'}"
    # nvlink ends each kernel's static shared memory on 16 bytes; ptxas would have kept the alignment the
    # module's dynamic window declares (1024 for swizzled TMA boxes): the sections are rounded up to it, where the
    # module's code (align_window_references) puts the window
    try:
        shared_window.align_static_shared(output, shared_window.dynamic_shared_alignment(ptx))
    except (OSError, ValueError) as error:
        return f"the linked cubin's shared sections could not be aligned: {error}"
    registers = dict(re.findall(r"Function properties for '([^']+)':\s*\n[^\n]*?used (\d+) registers",
                                linked.stdout + linked.stderr))
    sys.stdout.write(_with_linked_registers(done.stdout, registers))
    sys.stderr.write(_with_linked_registers(done.stderr, registers))
    return None


def _with_linked_registers(log: str, registers: dict[str, str]) -> str:
    """ptxas's -v lines, each kernel's `Used N registers` replaced by its count after linking."""
    out, current = [], None
    for line in log.splitlines(keepends=True):
        entry = re.search(r"Compiling entry function '([^']+)'", line)
        if entry:
            current = entry.group(1)
        elif current in registers and re.search(r"Used \d+ registers", line):
            line = re.sub(r"Used \d+ registers", f"Used {registers[current]} registers", line)
        out.append(line)
    return "".join(out)


def _blackwell_ptxas_rejects(real: str, args: list[str]) -> str | None:
    """What the real ptxas, for the Blackwell target the build asked for, says against the submission's own PTX
    (the B200's build would fail the same way: the submission's fault), or None when it assembles. Runs into a
    scratch output, so the emulated build below is unchanged."""
    handle, scratch = tempfile.mkstemp(suffix=".sm100-check.cubin")     # the emulation's folder is read-only
    os.close(handle)
    checked, skip = [], False
    for i, arg in enumerate(args):          # -O0: the check needs ptxas's verdict on the PTX, not its optimiser
        if skip or re.fullmatch(r"-O\d|--opt-level=\d", arg):
            skip = False
            continue
        if arg in ("--opt-level", "-O") and i + 1 < len(args):
            skip = True
            continue
        checked.append(arg)
    checked.append("-O0")
    for i, arg in enumerate(checked[:-1]):
        if arg in ("-o", "--output-file"):
            checked[i + 1] = scratch
    try:
        done = subprocess.run([real] + checked, capture_output=True, text=True)
    finally:
        os.remove(scratch)
    if done.returncode == 0:
        return None
    lines = [x.strip() for x in done.stderr.splitlines() if x.strip() and "warning" not in x.lower()]
    return (f"ptxas for {_arch_positions(args)[-1][1]} (the B200's target) rejects the submission's PTX, so its build "
            f"fails on a B200 too: {lines[0] if lines else 'no message'}")


def explain_ptxas_error(stderr: str, ptx: str) -> str:
    """One line: the PTX instruction ptxas rejected for sm_90a, and why."""
    lines = ptx.splitlines()
    for line in stderr.splitlines():
        m = re.search(r"line (\d+); error\s*:\s*(.*)", line)
        if m:
            number = int(m.group(1))
            text = " ".join(lines[number - 1].split()) if 0 < number <= len(lines) else "?"
            return f"cannot emulate `{text}`: ptxas for sm_90a says: {m.group(2).strip()}"
    first = next((x for x in stderr.splitlines() if x.strip() and "warning" not in x),
                 next((x for x in stderr.splitlines() if x.strip()), "no message"))
    return f"ptxas for sm_90a failed: {first.strip()}"


def fatbinary(args: list[str]) -> int:
    kept = []
    for arg in args:
        image = re.match(r"^--image3?=(.*)$", arg)
        if image:
            fields = dict(kv.split("=", 1) for kv in image.group(1).split(",") if "=" in kv)
            sm = fields.get("sm") or fields.get("profile", "").replace("sm_", "").replace("compute_", "")
            if re.match(r"1[0-2]\d", sm or ""):
                if fields.get("kind") == "ptx" or "compute_" in fields.get("profile", ""):
                    continue                # Blackwell PTX cannot be JIT-compiled on a Hopper GPU
                arg = arg.replace(f"sm={sm}", "sm=90a").replace(f"profile=sm_{sm}", "profile=sm_90a")
        kept.append(arg)
    return subprocess.call([toolchain.real_tool("fatbinary")] + kept)


def main(argv: list[str]) -> int:
    tool, args = argv[0], argv[1:]
    return {"nvcc": nvcc, "ptxas": ptxas, "fatbinary": fatbinary}[tool](args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
