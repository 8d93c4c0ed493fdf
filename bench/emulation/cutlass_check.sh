#!/usr/bin/env bash
# Our own CUTLASS 4.2 SM100 NVFP4 GEMM submission (tests/submissions/cutlass_sm100_nvfp4.py: CollectiveBuilder,
# OpClassBlockScaledTensorOp, KernelTmaWarpSpecialized1SmNvf4Sm100 with the CLC scheduler) under --emulate-blackwell,
# on the GPU machine, from the repository root:
#
#   bash bench/emulation/cutlass_check.sh        (LIMIT caps the run's seconds, default 560; ONLY=0,1 picks cases)
#
# or `bash bench/run_gpu.sh emulation/cutlass`. CUTLASS's headers: $CUTLASS_PATH if set; else the nvidia-cutlass
# wheel (.whl/nvidia_cutlass-4.2.0.0-py3-none-any.whl; the GPU machine has no registry), which run_gpu.sh installs
# into /tmp/site and this script installs there itself when run alone; else .device/cutlass-include.tar.xz (as the
# steps' `_cutlass` helper). Prints the headers used, then one row:
#   file | passed/total | seconds (the ~2.5-minute build included) | first error line
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
OUT=${OUT:-out/cutlass_check}
mkdir -p "$OUT"
SUB=tests/submissions/cutlass_sm100_nvfp4.py

headers() {     # the CUTLASS root eval.py will use, or nothing
    python3 -c "from arena.compile.nvcc import cutlass_include_dirs as c; d = c(); print(d[0] if d else '')" 2>/dev/null
}
if [ -z "${CUTLASS_PATH:-}" ] && [ -z "$(headers)" ]; then
    wheel=$(ls .whl/nvidia_cutlass-4.2.0.0-*.whl 2>/dev/null | head -1)
    if [ -n "$wheel" ]; then
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$wheel" \
            && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
    elif [ -f .device/cutlass-include.tar.xz ]; then
        mkdir -p /tmp/cutlass && tar xJf .device/cutlass-include.tar.xz -C /tmp/cutlass && export CUTLASS_PATH=/tmp/cutlass
    fi
fi
found=$(headers)
# the worker runs `python -I` (no PYTHONPATH): eval.py passes the headers on through CPATH and CUTLASS_PATH
[ -n "$found" ] && export CUTLASS_PATH=${CUTLASS_PATH:-$(dirname "$found")}
echo "CUTLASS headers: ${found:-none found (the build will say so)}"

start=$SECONDS
timeout "${LIMIT:-560}" python3 eval.py test --emulate-blackwell -q --timeout "${CASE_LIMIT:-400}" ${ONLY:+--only "$ONLY"} \
    --submission "$SUB" --task . --json "$OUT/cutlass.json" >"$OUT/cutlass.out" 2>&1
rc=$?
verdict=$(python3 bench/emulation/run_verdict.py "$OUT/cutlass.json" "$OUT/cutlass.out" "$rc" 400)
passed=$?
echo "file | passed/total | seconds | first error line"
echo "$SUB | ${verdict%% | *} | $((SECONDS - start)) | ${verdict#* | }"
grep -m3 -E "emulated tcgen05 warning|notice: --emulate" "$OUT/cutlass.out" | cut -c1-300
exit "$passed"
