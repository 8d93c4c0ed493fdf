#!/usr/bin/env bash
# False alarms of the parent's clock, on a machine of 4 GPUs: honest leaderboard runs on GPUs 0-2 (the shipped
# kernel and the PyTorch reference alternating, ranked_check.py honest), and on GPU 3 the shipped kernel under
# the competition's harness and ours (bench/timing/official_side_by_side.py; the official files in .official/,
# never committed). GPU 0 first writes a benchmark JSON whose windows bench/integrity/window_table.py prints.
# Every run is cut at LIMIT seconds (default 560); the runs that finished are counted. Logs go to $OUT.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; mkdir -p "$OUT"; LIMIT=${LIMIT:-560}
export PYTHONUNBUFFERED=1
[ -x .tools/bwrap ] && export ARENA_BWRAP=$PWD/.tools/bwrap
nvidia-smi -L
python3 eval.py test -q >/dev/null 2>&1            # builds the shipped kernel once, before the runs share it
START=$(date +%s)
left() { echo $(( LIMIT - ($(date +%s) - START) )); }
( export CUDA_VISIBLE_DEVICES=0
  python3 eval.py benchmark -q --json "$OUT/kernel_bench.json" > "$OUT/kernel_bench.log" 2>&1
  timeout "$(left)" python3 bench/integrity/ranked_check.py honest --runs 8 --first 1 --json "$OUT/honest_0.json" \
      > "$OUT/honest_0.log" 2>&1 ) &
for g in 1 2; do
  ( CUDA_VISIBLE_DEVICES=$g timeout "$(left)" python3 bench/integrity/ranked_check.py honest --runs 8 \
      --first $(( g % 2 )) --json "$OUT/honest_$g.json" > "$OUT/honest_$g.log" 2>&1 ) &
done
( CUDA_VISIBLE_DEVICES=3 timeout "$(left)" python3 bench/timing/official_side_by_side.py --official-eval \
    .official/eval_better_bench.py --runs "${SIDE_RUNS:-3}" --json "$OUT/side_kernel.json" submission.py \
    > "$OUT/side.log" 2>&1 ) &
wait
python3 bench/integrity/window_table.py "$OUT/kernel_bench.json"
for g in 0 1 2; do echo "== honest on GPU $g"; grep -E "^run|false alarms" "$OUT/honest_$g.log"; done
echo "== side by side"; grep -E "ours run|official run|vs official|%$" "$OUT/side.log" | tail -n 12
python3 - "$OUT" <<'PY'
import json, os, sys
runs = alarms = 0
for g in range(3):
    path = os.path.join(sys.argv[1], f"honest_{g}.json")
    if os.path.exists(path):
        doc = json.load(open(path))
        runs, alarms = runs + doc["runs"], alarms + doc["false_alarms"]
print(f"honest leaderboard runs finished: {runs}, false alarms: {alarms}")
PY
