#!/usr/bin/env bash
# Wheels for the offline GPU machine's Python, fetched on a machine with the package registry, into .whl/:
#
#   bash bench/emulation/bring_wheels.sh            CuTe DSL (nvidia-cutlass-dsl 4.3.5) and CUTLASS's headers
#   bash bench/emulation/bring_wheels.sh dsl        CuTe DSL only
#   bash bench/emulation/bring_wheels.sh cutlass    CUTLASS's headers only (nvidia-cutlass 4.2.0.0)
#   bash bench/emulation/bring_wheels.sh dsl-version X
#                                                   another CuTe DSL that competition files pin at import
#                                                   (nvidia-cutlass-dsl==X), packed as .whl/cpXY-cute-dsl-X.tar.xz
#                                                   (its nvidia_cutlass_dsl/ folder alone): bench/run_gpu.sh
#                                                   unpacks it into .cute-dsl/X/, where the worker finds it
#                                                   (arena/blackwell/dsl_versions.py); it uses the cuda-python of
#                                                   cpXY-site.tar.xz
#   bash bench/emulation/bring_wheels.sh tvm-ffi    apache-tvm-ffi, packed as .whl/cpXY-site-tvm-ffi.tar.xz: the
#                                                   runtime of CuTe DSL's --enable-tvm-ffi, which some competition
#                                                   files pip-install at import (the jail has no network; pip finds
#                                                   it installed and goes on)
#
# PYTHON_VERSION (3.12) and PLATFORM (manylinux_2_28_x86_64) name the GPU machine's interpreter; CUDA_BINDINGS
# (12.9.*: a CUDA 12 driver or newer; 13.* needs a CUDA 13 driver) picks cuda-bindings. At most 64 MiB travel per GPU
# call, and the DSL's wheel alone is 56 MiB, so the DSL travels repacked with xz: .whl/cp312-site.tar.xz holds
# nvidia-cutlass-dsl, cuda-bindings and cuda-pathfinder unpacked as site-packages holds them (the DSL's .pth
# file included), about 46 MiB. bench/run_gpu.sh unpacks it into the interpreter's own site-packages, where the
# evaluator's worker (`python -I`, which ignores PYTHONPATH) imports it. nvidia-cutlass stays a wheel (6 MiB),
# installed into /tmp/site: only the evaluator's side reads it, to find the headers. numpy and typing-extensions
# come with torch there. Prints each file's size and the total.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
WHAT=${1:-all}
PYTHON_VERSION=${PYTHON_VERSION:-3.12}
PLATFORM=${PLATFORM:-manylinux_2_28_x86_64}
CUDA_BINDINGS=${CUDA_BINDINGS:-12.9.*}
TAG=cp${PYTHON_VERSION/./}
case $WHAT in all|dsl|cutlass|tvm-ffi) ;; dsl-version) [ -n "${2:-}" ] || { echo "dsl-version needs a version"; exit 2; } ;;
    *) sed -n '2,16p' "$0"; exit 2 ;; esac

OUT="$ROOT/.whl"
mkdir -p "$OUT"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
download() {    # wheels for the GPU machine's interpreter, without their dependencies (named here instead)
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$PYTHON_VERSION" \
        --implementation cp --platform "$PLATFORM" -d "$WORK/wheels" "$@"
}

if [ "$WHAT" = all ] || [ "$WHAT" = dsl ]; then
    download nvidia-cutlass-dsl==4.3.5 "cuda-bindings==$CUDA_BINDINGS" "cuda-pathfinder~=1.1"
    mkdir -p "$WORK/site"
    for wheel in "$WORK"/wheels/*.whl; do
        python3 -m zipfile -e "$wheel" "$WORK/site"
    done
    echo "repacking $(ls "$WORK"/wheels | tr '\n' ' ')with xz (about 2 min)"
    tar -C "$WORK/site" -cf - . | xz -T0 -9 > "$OUT/$TAG-site.tar.xz.part"
    mv "$OUT/$TAG-site.tar.xz.part" "$OUT/$TAG-site.tar.xz"
    rm -f "$WORK"/wheels/*.whl
fi
if [ "$WHAT" = dsl-version ]; then
    download "nvidia-cutlass-dsl==$2"
    mkdir -p "$WORK/version"
    python3 -m zipfile -e "$WORK"/wheels/nvidia_cutlass_dsl-*.whl "$WORK/version"
    echo "repacking nvidia-cutlass-dsl $2 with xz (a few minutes)"
    tar -C "$WORK/version" -cf - nvidia_cutlass_dsl | xz -T0 -9 > "$OUT/$TAG-cute-dsl-$2.tar.xz.part"
    mv "$OUT/$TAG-cute-dsl-$2.tar.xz.part" "$OUT/$TAG-cute-dsl-$2.tar.xz"
    rm -f "$WORK"/wheels/*.whl
fi
if [ "$WHAT" = all ] || [ "$WHAT" = tvm-ffi ]; then
    download apache-tvm-ffi==0.1.15.post2
    mkdir -p "$WORK/tvm"
    python3 -m zipfile -e "$WORK"/wheels/apache_tvm_ffi-*.whl "$WORK/tvm"
    tar -C "$WORK/tvm" -cf - . | xz -T0 -9 > "$OUT/$TAG-site-tvm-ffi.tar.xz"
    rm -f "$WORK"/wheels/*.whl
fi
if [ "$WHAT" = all ] || [ "$WHAT" = cutlass ]; then
    download nvidia-cutlass==4.2.0.0
    mv "$WORK"/wheels/*.whl "$OUT/"
fi
ls -l "$OUT" | awk 'NR > 1 { printf "%8.1f MiB  %s\n", $5 / 1048576, $9 }'
total=$(du -cb "$OUT"/* | tail -1 | cut -f1)
echo "$(awk -v t="$total" 'BEGIN { printf "%.1f", t / 1048576 }') MiB in .whl/ (at most 64 MiB travel per GPU call)"
