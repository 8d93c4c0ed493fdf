#!/usr/bin/env bash
# Issue 21's GPU figures in one device call, every line written to $OUT/issue21.log as it happens (a call cut
# off by its time limit still returns what it measured): the benchmark's wall time with where it went, the GPU
# timing tests, then the side-by-side of the host-heavy PyTorch submission (RUNS runs, default 1).
OUT=${OUT:-out}; mkdir -p "$OUT"; LOG="$OUT/issue21.log"; export PYTHONUNBUFFERED=1
{
python3 -c "import subprocess, sys, time; t = time.perf_counter(); \
rc = subprocess.run([sys.executable, 'eval.py', 'benchmark', '--json', '/tmp/bw.json'], stdout=subprocess.DEVNULL).returncode; \
print(f'eval.py benchmark: exit {rc}, {time.perf_counter() - t:.1f} s wall')"
python3 -c "
import json; d = json.load(open('/tmp/bw.json')); print('wall_s', d['system']['wall_s'])
for c in d['cases']: print(c['spec'], c['stats']['runs'], round(c['stats']['mean'] / 1e3, 2), c['timing'].get('harness_s'), c['warnings'])"
python3 -m pytest -q -p no:cacheprovider tests/test_timing_methods.py -k "json_says or replayed" 2>&1 | tail -3
timeout "${SIDE_S:-300}" python3 bench/official_side_by_side.py --official-eval .official/eval_better_bench.py \
    --runs "${RUNS:-1}" --json "$OUT/side_torch.json" submissions/torch_reference.py
} 2>&1 | tee "$LOG" | tail -30
