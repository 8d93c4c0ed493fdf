"""One self-contained CUDA source for the sm_100a hardware path (what submission.py embeds as CUDA_SM100).

Inlines the local headers of nvfp4_gemm_sm100.cuh (../common/nvfp4_common.cuh, tcgen05_desc.h, tcgen05_hw.cuh);
the emulation include stays inside its #ifdef (never defined in the submission). In submission.py the common
header is not inlined: CUDA_SM100 = CUDA_COMMON + this text, as for the sm_90a kernel.
`python kernels/sm100/amalgamate.py` prints the self-contained source.
"""
import os
import re

KDIR = os.path.dirname(os.path.abspath(__file__))
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"\s*$')
_KEEP = {"tcgen05_emulation.cuh"}
COMMON = "../common/nvfp4_common.cuh"


def _expand(name: str, seen: set, common: bool) -> list:
    out = []
    for line in open(os.path.join(KDIR, name)).read().splitlines():
        m = _INCLUDE.match(line)
        if m and m.group(1) == COMMON and not common:
            out.append("// kernels/common/nvfp4_common.cuh: CUDA_COMMON, which precedes this text")
            continue
        if m and m.group(1) not in _KEEP:
            if m.group(1) not in seen:
                seen.add(m.group(1))
                out += [f"// ---- begin {m.group(1)}"] + _expand(m.group(1), seen, common) + [f"// ---- end {m.group(1)}"]
            continue
        if line.strip() == "#pragma once":
            continue
        out.append(line)
    return out


def amalgamated_source(emulation: bool = False, common: bool = True) -> str:
    """emulation=True also inlines tcgen05_emulation.cuh (compile it with -DNVFP4_TCGEN05_EMULATION);
    common=False leaves kernels/common out (for submission.py, where CUDA_COMMON comes first)."""
    global _KEEP
    saved = _KEEP
    _KEEP = set() if emulation else saved
    try:
        src = "\n".join(_expand("nvfp4_gemm_sm100.cuh", set(), common)) + "\n"
    finally:
        _KEEP = saved
    if not emulation:
        assert "stream" not in src.lower(), "the competition rejects files containing that word"
    return src


if __name__ == "__main__":
    print(amalgamated_source(), end="")
