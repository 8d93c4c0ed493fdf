#!/usr/bin/env bash
# The jail on a GPU: the shipped kernel through test/benchmark/leaderboard in the jail, the side-stream exploit
# failing leaderboard and marked untrusted in benchmark, the jail probe's view, and CUDA IPC across the jail.
# Needs bubblewrap (ARENA_BWRAP, see bench/integrity/bring_bwrap.sh). Prints one row per check; logs in $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp}
export PYTHONUNBUFFERED=1
row() { printf '%-46s %-5s %s\n' "$1" "$2" "$3"; }
large=$(mktemp); echo "m: 128; n: 7168; k: 16384; l: 1; seed: 1111" > "$large"
small=$(mktemp); echo "m: 128; n: 256; k: 256; l: 1; seed: 1111" > "$small"
probe=$(mktemp -d); chmod 1777 "$probe"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader

t0=$(date +%s); python3 eval.py test --json "$out/test.json" > "$out/test.log" 2>&1; rc=$?
row "eval.py test (submission.py)" $rc "$(grep -E 'cases passed' "$out/test.log") $(( $(date +%s) - t0 ))s"
t0=$(date +%s); python3 eval.py benchmark --json "$out/bench.json" > "$out/bench.log" 2>&1; rc=$?
row "eval.py benchmark (submission.py)" $rc "$(python3 -c "
import json; d=json.load(open('$out/bench.json')); print(' / '.join(f\"{c['stats']['mean']/1e3:.2f}\" if c['stats'] else c['error'][:80] for c in d['cases']), 'us; untrusted:', [c['untrusted'][:60] for c in d['cases'] if c.get('untrusted')])") $(( $(date +%s) - t0 ))s"
t0=$(date +%s); python3 eval.py leaderboard --json "$out/lb.json" > "$out/lb.log" 2>&1; rc=$?
row "eval.py leaderboard (submission.py)" $rc "$(grep -E 'geometric|cases passed' "$out/lb.log" | tr '\n' ' ') $(( $(date +%s) - t0 ))s"
t0=$(date +%s); python3 eval.py leaderboard "$large" --submission tests/exploits/gpu_side_stream.py --max-runs 40 \
    --json "$out/side_lb.json" > "$out/side_lb.log" 2>&1; rc=$?
row "side stream: leaderboard" $rc "$(python3 -c "import json; print(json.load(open('$out/side_lb.json'))['cases'][0]['error'][:150])") $(( $(date +%s) - t0 ))s"
t0=$(date +%s); python3 eval.py benchmark "$large" --submission tests/exploits/gpu_side_stream.py --max-runs 40 \
    --json "$out/side_bench.json" > "$out/side_bench.log" 2>&1; rc=$?
row "side stream: benchmark" $rc "untrusted: $(python3 -c "import json; print(json.load(open('$out/side_bench.json'))['cases'][0]['untrusted'][:120])") $(( $(date +%s) - t0 ))s"
t0=$(date +%s); ARENA_WORKER_WRITABLE=$probe EXPLOIT_DIR=$probe EXPLOIT_HOST_PID=$$ python3 eval.py test "$small" \
    --submission tests/exploits/jail_probe.py > "$out/probe.log" 2>&1; rc=$?
row "jail probe (GPU)" $rc "$(tr '\n' ';' < "$probe/jail")"
row "CUDA IPC across the jail" "" "$(python3 bench/integrity/cuda_ipc_probe.py 2>&1 | tr '\n' ';')"
