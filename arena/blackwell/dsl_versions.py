"""The CuTe DSL version a submission pins, when it is not the installed one.

Competition files written for a later DSL install it at import (`pip install nvidia-cutlass-dsl==X`), which the
jail's missing network turns into a no-op: the file then meets the installed DSL (4.3.5, the B200 runner's) and
fails on a name that version lacks. Other versions can sit beside the installed one, unpacked under
`<checkout>/.cute-dsl/<version>/` (the wheel's `nvidia_cutlass_dsl/` folder; `bash bench/emulation/bring_wheels.sh
dsl-version X` packs it for the GPU machine, `python3 -m pip install --no-deps --target .cute-dsl/X
nvidia-cutlass-dsl==X` puts it there on a machine with the registry). `activate` puts the pinned one first on the
import path before the submission imports `cutlass`; it shares the installed DSL's cuda-python.
"""
from __future__ import annotations

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VERSIONS_DIR = os.path.join(ROOT, ".cute-dsl")
_PIN = re.compile(r"nvidia-cutlass-dsl\s*==\s*([\w.]+)")


def pinned_version(source: str) -> str | None:
    """The version the source pins with `nvidia-cutlass-dsl==X`, if any."""
    found = _PIN.search(source)
    return found.group(1) if found else None


def packages_folder(version: str, root: str = VERSIONS_DIR) -> str:
    """Where that version's `cutlass` package folder must be (what its wheel's .pth file puts on the path)."""
    return os.path.join(root, version, "nvidia_cutlass_dsl", "python_packages")


def activate(source: str, installed: str | None, root: str = VERSIONS_DIR) -> str | None:
    """Put the pinned DSL version first on sys.path when it differs from `installed` and `root` holds it, before
    anything imported `cutlass`. Returns the version put there, else None."""
    version = pinned_version(source)
    if not version or version == installed or "cutlass" in sys.modules:
        return None
    folder = packages_folder(version, root)
    if not os.path.isdir(os.path.join(folder, "cutlass")):
        return None
    sys.path.insert(0, folder)
    return version
