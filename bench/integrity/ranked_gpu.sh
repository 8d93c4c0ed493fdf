#!/usr/bin/env bash
# The ranking's integrity on a machine of 4 GPUs, one check per GPU at once (each its own eval.py runs):
#   GPU 0: the shipped kernel's benchmark (the parent's clock beside the reported mean), then the GPU exploit suite
#   GPU 1: every timing forgery beside its honest control (ranked_check.py exploits)
#   GPU 2, 3: honest leaderboard runs, the shipped kernel and the PyTorch reference alternating (HONEST_RUNS each);
#            with SIDE_RUNS set, GPU 3 runs the shipped kernel under the competition's harness and ours instead
#            (bench/timing/official_side_by_side.py; the official files in .official/, never committed)
# Logs go to $OUT (default out/); the tables are printed at the end. On fewer GPUs the checks share GPU 0.
# SKIP_GPU_CHECK=1 leaves the exploit suite out (it takes ~150 s after the benchmark).
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
[ -x .tools/bwrap ] && export ARENA_BWRAP=$PWD/.tools/bwrap
GPUS=$(nvidia-smi -L | wc -l)
gpu() { echo $(( $1 % GPUS )); }
nvidia-smi -L
python3 eval.py test -q >/dev/null 2>&1            # builds the shipped kernel once, before the runs share it
( export CUDA_VISIBLE_DEVICES=$(gpu 0)
  python3 eval.py benchmark --json "$OUT/kernel_bench.json" > "$OUT/kernel_bench.log" 2>&1
  [ -n "${SKIP_GPU_CHECK:-}" ] || python3 bench/integrity/gpu_check.py > "$OUT/gpu_check.log" 2>&1 ) &
( CUDA_VISIBLE_DEVICES=$(gpu 1) python3 bench/integrity/ranked_check.py exploits > "$OUT/forgeries.log" 2>&1 ) &
( CUDA_VISIBLE_DEVICES=$(gpu 2) python3 bench/integrity/ranked_check.py honest --runs "${HONEST_RUNS:-10}" \
    --json "$OUT/honest_a.json" > "$OUT/honest_a.log" 2>&1 ) &
if [ -n "${SIDE_RUNS:-}" ]; then     # GPU 3: the shipped kernel under the competition's harness and ours instead
    ( CUDA_VISIBLE_DEVICES=$(gpu 3) timeout 540 python3 bench/timing/official_side_by_side.py --official-eval \
        .official/eval_better_bench.py --runs "$SIDE_RUNS" --json "$OUT/side_kernel.json" submission.py \
        > "$OUT/honest_b.log" 2>&1 ) &
else
    ( CUDA_VISIBLE_DEVICES=$(gpu 3) python3 bench/integrity/ranked_check.py honest --runs "${HONEST_RUNS:-10}" \
        --first 1 --json "$OUT/honest_b.json" > "$OUT/honest_b.log" 2>&1 ) &
fi
wait
python3 - "$OUT/kernel_bench.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
for c in doc["cases"]:
    s, t = c.get("stats") or {}, c.get("timing") or {}
    print(f"shipped kernel case {c['index']}: mean {s.get('mean', 0) / 1e3:.2f} us, parent clock "
          f"{t.get('parent_clock_ns_per_call', 0) / 1e3:.2f} us per call, {c.get('error') or 'passed'}")
PY
for f in forgeries honest_a honest_b; do echo "== $f"; tail -n 25 "$OUT/$f.log"; done
[ -f "$OUT/gpu_check.log" ] && { echo "== gpu_check"; tail -n 30 "$OUT/gpu_check.log"; }
