#!/usr/bin/env bash
# One device-machine call for the Hopper kernel (issue 16): build, bit-exactness, timing against cuBLAS bf16 /
# FP8, forced (MB, cluster) configurations, the evaluator's own test / robustness / benchmark runs and the GPU
# tests of the submission. Prints a short summary at the end; full logs go to $OUT/hopper.log.
# Usage (repo root, on the GPU machine): bash bench/hopper_kernel_gpu.sh [STEP ...]
#   steps: kernel configs eval gputests stress   (default: all);  CONFIGS="1:1,2:1,..." REPS=30
#   also (not in the default): micro  MICROS="wgmma_rate ..." programs of bench/micro/ (default wgmma_rate)
#                              probes PROBES="11,256" (NVFP4_PROFILE_MODE builds) and VARIANTS, timing only
#   stress: bench/cluster_stress.py, STRESS_CALLS (40) repeated calls of each cluster configuration (races)
#   VARIANTS="name=MACRO=V+...,..." adds builds of kernels/ with those macros to the configs step
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
REPS=${REPS:-30}
CONFIGS=${CONFIGS:-1:1,2:1,1:2,2:2,1:4,2:4,1:8,2:8}
declare -a summary
step() {  # name, command...
    local name=$1; shift
    local start=$SECONDS
    timeout "${STEP_TIMEOUT:-300}" "$@" >"$OUT/$name.log" 2>&1
    local rc=$?
    summary+=("$(printf '%-10s rc=%-4s %4ss' "$name" "$rc" "$((SECONDS - start))")")
    { echo "=== $name (rc=$rc): $*"; cat "$OUT/$name.log"; } >>"$OUT/hopper.log"
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
for s in ${*:-kernel configs eval gputests stress}; do
    case $s in
        kernel) step kernel python3 bench/hopper_gemm.py --reps "$REPS" ;;
        configs) step configs python3 bench/hopper_gemm.py --reps "$REPS" --no-checks --configs "$CONFIGS" \
                    ${VARIANTS:+--variants "$VARIANTS"} ;;
        eval) step test python3 eval.py test
              step robust python3 eval.py test --set robustness
              step benchmark python3 eval.py benchmark ;;
        gputests) step gputests python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_submission_source.py ;;
        micro) step micro bash -c 'for m in ${MICROS:-wgmma_rate}; do echo "== $m"; nvcc -O3 \
                   -gencode=arch=compute_90a,code=sm_90a bench/micro/$m.cu -o /tmp/$m && /tmp/$m || exit 1; done' ;;
        probes) step probes python3 bench/hopper_gemm.py --reps "$REPS" --no-checks ${PROBES:+--probes "$PROBES"} \
                    ${VARIANTS:+--variants "$VARIANTS"} ;;
        stress) step stress python3 bench/cluster_stress.py --calls "${STRESS_CALLS:-40}" ;;
        *) echo "unknown step $s" ;;
    esac
done
echo "==== tails"
for f in micro probes kernel configs test robust benchmark gputests stress; do
    [ -f "$OUT/$f.log" ] && { echo "--- $f"; tail -n 22 "$OUT/$f.log"; }
done
echo "==== summary"; printf '%s\n' "${summary[@]}"
