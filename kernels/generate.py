"""Write every generated region of submission.py from the kernel sources (or check that they are in sync).

    python kernels/generate.py           # rewrite the regions in place
    python kernels/generate.py --check   # exit 1, naming the region, if submission.py differs from kernels/

submission.py stays one uploadable file; the CUDA it carries is edited here, as real files:
- kernels/common/nvfp4_common.cuh  -> CUDA_COMMON (shared by both paths)
- kernels/sm90/nvfp4_gemm_sm90.cuh -> CUDA_SM90 (= CUDA_COMMON + this text: one translation unit)
- kernels/sm100/ (amalgamated, with its Python glue) -> the sm100 region (built by kernels/sm100/integrate.py)
Each .cuh file is copied from the line after its "generated text begins" marker on, verbatim except for the
bench-only profiling probes: every `#if NVFP4_PROFILE_MODE ...` block is resolved for mode 0 (the probes
produce wrong results and have no place in the uploadable file; bench/kernel/hopper_gemm.py builds them from kernels/).
"""
import re
import os
import sys

KDIR = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(KDIR)
SUBMISSION = os.path.join(ROOT, "submission.py")
MARKER = "// ---- generated text begins on the next line\n"

# (region name, source file, the Python assignment that opens the string in submission.py)
STRINGS = [("common", os.path.join(KDIR, "common", "nvfp4_common.cuh"), 'CUDA_COMMON = r"""'),
           ("sm90", os.path.join(KDIR, "sm90", "nvfp4_gemm_sm90.cuh"), 'CUDA_SM90 = CUDA_COMMON + r"""')]

sys.path.insert(0, os.path.join(KDIR, "sm100"))
import integrate as sm100  # noqa: E402


PROFILE_MACRO = "NVFP4_PROFILE_MODE"
PROFILE_IF = re.compile(r"#if\s+(!?)\(?\s*NVFP4_PROFILE_MODE\s*&\s*\d+\s*\)?\s*$")


def without_profiling(text: str, path: str) -> str:
    """text with each NVFP4_PROFILE_MODE conditional replaced by the branch mode 0 takes.

    Understands the forms the kernels use (`#ifndef NVFP4_PROFILE_MODE` holding its default, `#if
    NVFP4_PROFILE_MODE & N`, `#if !(NVFP4_PROFILE_MODE & N)`, each with an optional `#else`, not nested);
    anything else naming the macro stops the generator rather than guess."""
    out, keep, inside = [], True, False
    for number, line in enumerate(text.splitlines(keepends=True), 1):
        directive = line.strip()
        if not inside:
            if directive == f"#ifndef {PROFILE_MACRO}":
                inside, keep = True, False
            elif PROFILE_IF.match(directive):
                inside, keep = True, PROFILE_IF.match(directive).group(1) == "!"
            elif PROFILE_MACRO in line:
                raise SystemExit(f"{path}:{number}: {PROFILE_MACRO} used outside a form the generator resolves")
            else:
                out.append(line)
            continue
        if directive.startswith("#if"):
            raise SystemExit(f"{path}:{number}: a conditional nested in a {PROFILE_MACRO} block")
        if directive == "#else":
            keep = not keep
        elif directive == "#endif":
            inside, keep = False, True
        elif keep:
            out.append(line)
    if inside:
        raise SystemExit(f"{path}: a {PROFILE_MACRO} block is never closed")
    return "".join(out)


def source_text(path: str) -> str:
    text = open(path).read()
    if MARKER not in text:
        raise SystemExit(f"{path}: no '{MARKER.strip()}' line")
    body = without_profiling(text.split(MARKER, 1)[1], path)
    if '"""' in body or body.rstrip("\n").endswith("\\"):
        raise SystemExit(f"{path}: holds a triple quote or ends in a backslash (cannot sit in a raw string)")
    return body


def with_string(current: str, opening: str, body: str) -> str:
    start = current.index(opening) + len(opening)
    end = current.index('"""', start)
    return current[:start] + "\n" + body + current[end:]


def generated(current: str) -> dict:
    """Each region's name -> submission.py with that region (and the ones before it) regenerated."""
    steps, text = {}, current
    for name, path, opening in STRINGS:
        text = with_string(text, opening, source_text(path))
        steps[name] = text
    steps["sm100"] = sm100.patched(text)
    return steps


def main() -> int:
    current = open(SUBMISSION).read()
    steps = generated(current)
    out = steps["sm100"]
    if "--check" in sys.argv:
        before, stale = current, []
        for name, text in steps.items():
            if text != before:
                stale.append(name)
            before = text
        print("submission.py: every generated region in sync" if not stale else
              f"submission.py OUT OF SYNC with kernels/: region(s) {', '.join(stale)} (run kernels/generate.py)")
        return 0 if not stale else 1
    if out != current:
        with open(SUBMISSION, "w") as f:
            f.write(out)
    print("submission.py: generated regions written" if out != current else "submission.py: already in sync")
    return 0


if __name__ == "__main__":
    sys.exit(main())
