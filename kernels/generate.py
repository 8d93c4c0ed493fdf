"""Write every generated region of submission.py from the kernel sources (or check that they are in sync).

    python kernels/generate.py           # rewrite the regions in place
    python kernels/generate.py --check   # exit 1, naming the region, if submission.py differs from kernels/

submission.py stays one uploadable file; the CUDA it carries is edited here, as real files:
- kernels/common/nvfp4_common.cuh  -> CUDA_COMMON (shared by both paths)
- kernels/sm90/nvfp4_gemm_sm90.cuh -> CUDA_SM90 (= CUDA_COMMON + this text: one translation unit)
- kernels/sm100/ (amalgamated, with its Python glue) -> the sm100 region (built by kernels/sm100/integrate.py)
Each .cuh file is copied from the line after its "generated text begins" marker on, verbatim.
"""
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


def source_text(path: str) -> str:
    text = open(path).read()
    if MARKER not in text:
        raise SystemExit(f"{path}: no '{MARKER.strip()}' line")
    body = text.split(MARKER, 1)[1]
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
