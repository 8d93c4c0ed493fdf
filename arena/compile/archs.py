"""What `eval.py compile` knows of each arch: its nvcc flag, its tensor-core instruction in the SASS, and which
archs a source is written for. Used by sources.py (a source's targets), nvcc.py (the -gencode flag), build.py
(counting MMA instructions) and verdict.py (naming them); it imports nothing of the project.
"""
from __future__ import annotations

import re

ARCH_FLAGS = {"sm_90a": "-gencode=arch=compute_90a,code=sm_90a",
              "sm_100a": "-gencode=arch=compute_100a,code=sm_100a"}
MMA_PATTERN = {"sm_90a": re.compile(r"\bHGMMA(\.[\w.]+)?"), "sm_100a": re.compile(r"\bUTC\w*MMA(\.[\w.]+)?")}
MMA_NAME = {"sm_90a": "HGMMA (wgmma)", "sm_100a": "UTC*MMA (tcgen05.mma)"}
EMULATED = "sm_100a emulated"     # an sm_100a build through --emulate-blackwell's toolchain: an sm_90a image

_ARCH_MARK = re.compile(r"^\s*//\s*arena:\s*arch\s+(sm_\w+)", re.M)
_SM100_HINT = re.compile(r"tcgen05\.|\bSm10[03]\w*|\bSM10[03]_|__CUDA_ARCH_FEAT_SM10[03]|CUTLASS_ARCH_MMA_SM100")
_SM90_HINT = re.compile(r"wgmma\.|\bSm90\w*|\bSM90_|__CUDA_ARCH_FEAT_SM90|CUTLASS_ARCH_MMA_SM90")
_ARCH_NUMBER = re.compile(r"(?:sm|compute)_(\d+)[af]?")


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


def marked_archs(text: str) -> list[str]:
    """The archs a source names in `// arena: arch sm_100a` marks, in order."""
    return _ARCH_MARK.findall(text)


def implied_targets(text: str) -> list[str] | None:
    """The archs a source's own code implies: its `// arena: arch` marks, else tcgen05 / Sm100 -> sm_100a and
    wgmma / Sm90 -> sm_90a (those only build there, or are guarded for there), else None (any)."""
    marks = marked_archs(text)
    if marks:
        return marks
    found = [arch for arch, hint in (("sm_90a", _SM90_HINT), ("sm_100a", _SM100_HINT)) if hint.search(text)]
    return found or None


def target_archs(text: str) -> list[str] | None:
    """Kept for callers that have only the text (see implied_targets)."""
    return implied_targets(text)
