#!/usr/bin/env bash
# The sandbox on a GPU (issue 12): the shipped kernel through every mode, the GPU exploits, and the sandbox
# and exploit suites with CUDA tensors crossing by IPC. Prints a short table; logs go to ${OUT:-/tmp}.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp}
export PYTHONUNBUFFERED=1
row() { printf '%-44s %-6s %s\n' "$1" "$2" "$3" | tee -a "$out/summary.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/summary.txt"
python3 -c "import torch; print('torch', torch.__version__)" | tee -a "$out/summary.txt"

t0=$(date +%s); python3 eval.py test --json "$out/test.json" > "$out/test.log" 2>&1; rc=$?
row "eval.py test (submission.py)" "$rc" "$(grep -E 'cases passed|isolation' "$out/test.log" | tr '\n' ' ') $(( $(date +%s) - t0 ))s"
t0=$(date +%s); python3 eval.py benchmark --json "$out/bench.json" > "$out/bench.log" 2>&1; rc=$?
row "eval.py benchmark (submission.py)" "$rc" "$(python3 -c "
import json; d=json.load(open('$out/bench.json')); print(' / '.join(f\"{c['stats']['mean']/1e3:.2f}\" if c['stats'] else c['error'][:80] for c in d['cases']), 'us; warnings:', sum(len(c['warnings']) for c in d['cases']))") $(( $(date +%s) - t0 ))s"
t0=$(date +%s); python3 eval.py leaderboard --json "$out/lb.json" > "$out/lb.log" 2>&1; rc=$?
row "eval.py leaderboard (submission.py)" "$rc" "$(grep -E 'geometric|cases passed' "$out/lb.log" | tr '\n' ' ') $(( $(date +%s) - t0 ))s"
t0=$(date +%s); python3 bench/integrity_gpu_check.py --json "$out/integrity_gpu.json" > "$out/integrity_gpu.log" 2>&1; rc=$?
row "bench/integrity_gpu_check.py" "$rc" "$(tail -3 "$out/integrity_gpu.log" | tr '\n' ' ') $(( $(date +%s) - t0 ))s"
t0=$(date +%s); timeout 420 python3 -m pytest -q -p no:cacheprovider tests/test_sandbox.py tests/test_channel.py \
    tests/test_integrity_exploits.py -x -k "not signal and not survivor and not evaluator_imports" > "$out/pytest.log" 2>&1; rc=$?
row "pytest sandbox+exploits (CUDA IPC)" "$rc" "$(tail -1 "$out/pytest.log") $(( $(date +%s) - t0 ))s"
cat "$out/summary.txt"
