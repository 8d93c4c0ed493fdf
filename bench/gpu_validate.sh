#!/usr/bin/env bash
# One device-machine call that checks the evaluator on a real GPU and prints a short summary at the end.
# Usage (repo root, on the GPU machine): bash bench/gpu_validate.sh [STEP ...]
#   steps: reference timing test bench3 submission integrity diagnose tasks gputests   (default: all)
#   and, not in the default: probe side_kernel side_torch benchwall (issue 21; the side-by-side steps need the
#   official eval_better_bench.py and utils.py in .official/, fetched by you and carried, never committed)
# All output goes to $OUT/all.log (the device tool returns few files); per-step logs and JSON stay in $WORK.
# Python wheels the machine lacks travel in .whl/ (see README of the device tool).
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"
WORK=$(mktemp -d)
export PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        && export PYTHONPATH=/tmp/site
fi
steps=${*:-reference timing test bench3 submission integrity diagnose tasks gputests}
declare -a summary
step() {  # name, command...
    local name=$1; shift
    local start=$SECONDS
    "$@" >"$WORK/$name.log" 2>&1
    local rc=$?
    summary+=("$(printf '%-12s rc=%-4s %4ss  %s' "$name" "$rc" "$((SECONDS - start))" "$(tail -n 1 "$WORK/$name.log" | cut -c1-90)")")
    { echo "=== $name (rc=$rc): $*"; cat "$WORK/$name.log"; } >>"$OUT/all.log"
    echo "=== $name (rc=$rc)"; tail -n 25 "$WORK/$name.log"
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
for s in $steps; do
    case $s in
        reference) step reference python3 bench/reference_vs_official.py ;;
        timing) step timing python3 bench/timing_overhead.py ;;
        test) step test python3 eval.py test --submission submissions/torch_reference.py --json "$WORK/test.json" ;;
        bench3) for i in 1 2 3; do
                    step "bench$i" python3 eval.py benchmark --submission submissions/torch_reference.py --json "$WORK/bench$i.json"
                done
                step spread python3 bench/benchmark_spread.py "$WORK"/bench1.json "$WORK"/bench2.json "$WORK"/bench3.json ;;
        submission) step sub_test python3 eval.py test --json "$WORK/sub_test.json"
                    step sub_robust python3 eval.py test --set robustness
                    for i in 1 2 3; do step "sub_bench$i" python3 eval.py benchmark --json "$WORK/sub_bench$i.json"; done
                    step sub_spread python3 bench/benchmark_spread.py "$WORK"/sub_bench1.json "$WORK"/sub_bench2.json "$WORK"/sub_bench3.json
                    step sub_leader python3 eval.py leaderboard --max-runs 300 ;;
        integrity) [ -f bench/integrity_gpu_check.py ] && step integrity python3 bench/integrity_gpu_check.py ;;
        diagnose) [ -f bench/diagnose_gpu_check.py ] && step diagnose python3 bench/diagnose_gpu_check.py ;;
        tasks) [ -f bench/tasks_gpu_check.py ] && step tasks python3 bench/tasks_gpu_check.py ;;
        probe) step probe python3 bench/flush_clock_probe.py ;;
        side_kernel) step side_kernel python3 bench/official_side_by_side.py --official-eval .official/eval_better_bench.py \
                         --runs "${RUNS:-5}" --json "$OUT/side_kernel.json" submission.py ;;
        side_torch) step side_torch python3 bench/official_side_by_side.py --official-eval .official/eval_better_bench.py \
                        --runs "${RUNS:-5}" --json "$OUT/side_torch.json" submissions/torch_reference.py ;;
        benchwall) for i in 1 2; do   # the first one includes the extension's build when the cache is cold
                       step "benchwall$i" python3 -c "import subprocess, sys, time; t = time.perf_counter(); \
rc = subprocess.run([sys.executable, 'eval.py', 'benchmark'], stdout=subprocess.DEVNULL).returncode; \
print(f'eval.py benchmark: exit {rc}, {time.perf_counter() - t:.1f} s wall')"
                   done ;;
        gputests) step gputests python3 -m pytest -q -m gpu -p no:cacheprovider tests ;;
        *) echo "unknown step $s" ;;
    esac
done
echo; echo "==== summary ($(nvidia-smi --query-gpu=name --format=csv,noheader))"
printf '%s\n' "${summary[@]}"
