#!/usr/bin/env bash
# On a machine with the registry: the wheels bench/emulation/dsl_check.sh installs on the offline GPU machine
# (Python 3.12, x86_64), into .whl/ (git-ignored). Only what torch's machine lacks: the DSL and the cuda-python
# modules it imports (cuda.bindings, which needs cuda-pathfinder); numpy and typing-extensions come with torch.
# About 63 MiB: carry .whl on its own. PYVER overrides the Python version.
set -eu
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
python3 -m pip download --python-version "${PYVER:-3.12}" --platform manylinux_2_28_x86_64 --only-binary=:all: \
    --no-deps -d .whl -r requirements-cute.txt cuda-bindings==13.4.4 cuda-pathfinder==1.9.1
ls -la .whl
