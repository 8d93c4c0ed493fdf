#!/usr/bin/env bash
# Issue 21's GPU figures, every line written to $OUT/issue21.log as it happens (a call cut off by its time
# limit still returns what it measured). Usage: bash bench/issue21_gpu.sh STEP ...
#   wall         two `eval.py benchmark` runs of the shipped kernel: wall time and where it went (the first
#                includes the extension's build on a fresh machine)
#   side_torch   the host-heavy PyTorch submission beside the official harness, RUNS runs (default 5), with a
#                --no-sandbox variant of ours; cut at SIDE_S seconds (default 540), printing what it finished
#   side_kernel  the shipped kernel beside the official harness, RUNS runs
#   gputests     pytest -m gpu
#   integrity    bench/integrity_gpu_check.py
#   repeat       RUNS `eval.py benchmark` runs of the shipped kernel alone, back to back: per-run means and spread
#   within       RUNS processes, each timing every benchmark shape 3 times: run-to-run movement inside a
#                process against between processes
#   sm100emu     the sm_100a kernel through its emulation build (library and submission glue), test shapes
# The side-by-side steps need the official eval_better_bench.py and utils.py in .official/ (carried, never
# committed).
OUT=${OUT:-out}; mkdir -p "$OUT"; LOG="$OUT/issue21.log"; export PYTHONUNBUFFERED=1
for step in "$@"; do
    start=$SECONDS
    echo "=== $step" | tee -a "$LOG"
    case $step in
        wall) for i in 1 2; do
                  python3 -c "import subprocess, sys, time; t = time.perf_counter(); \
rc = subprocess.run([sys.executable, 'eval.py', 'benchmark', '--json', '/tmp/bw.json'], stdout=subprocess.DEVNULL).returncode; \
print(f'eval.py benchmark: exit {rc}, {time.perf_counter() - t:.1f} s wall')"
                  python3 -c "
import json; d = json.load(open('/tmp/bw.json')); print('wall_s', d['system']['wall_s'])
for c in d['cases']: print(c['spec'], c['stats']['runs'], round(c['stats']['mean'] / 1e3, 2), c['timing'].get('harness_s'), c['warnings'])"
              done ;;
        side_torch) timeout "${SIDE_S:-540}" python3 bench/official_side_by_side.py --official-eval \
                        .official/eval_better_bench.py --runs "${RUNS:-5}" --also-no-sandbox \
                        --json "$OUT/side_torch.json" submissions/torch_reference.py ;;
        side_kernel) timeout "${SIDE_S:-540}" python3 bench/official_side_by_side.py --official-eval \
                         .official/eval_better_bench.py --runs "${RUNS:-5}" --json "$OUT/side_kernel.json" submission.py ;;
        gputests) timeout "${TESTS_S:-400}" python3 -m pytest -q -m gpu -p no:cacheprovider tests 2>&1 | tail -15 ;;
        integrity) timeout "${TESTS_S:-400}" python3 bench/integrity_gpu_check.py 2>&1 | tail -30 ;;
        repeat) for i in $(seq "${RUNS:-5}"); do
                    python3 eval.py benchmark --json "/tmp/rep$i.json" > /dev/null || echo "run $i failed"
                done
                python3 -c "
import json, statistics, sys
runs = [json.load(open(f'/tmp/rep{i}.json')) for i in range(1, int(sys.argv[1]) + 1)]
for n, case in enumerate(runs[0]['cases']):
    means = [r['cases'][n]['stats']['mean'] / 1e3 for r in runs]
    errs = [r['cases'][n]['stats']['err'] / r['cases'][n]['stats']['mean'] * 100 for r in runs]
    med = statistics.median(means)
    print(case['spec'], ' '.join(f'{m:.2f}' for m in means), f'spread {(max(means) - min(means)) / med * 100:.2f}%',
          f'within-run err <= {max(errs):.2f}%')" "${RUNS:-5}" ;;
        within) : > /tmp/within.txt    # each benchmark shape 3 times, interleaved, in one process
                for r in 1 2 3; do for shape in "n: 7168; k: 16384" "n: 4096; k: 7168" "n: 7168; k: 2048"; do
                    echo "m: 128; $shape; l: 1; seed: 1111" >> /tmp/within.txt; done; done
                for i in $(seq "${RUNS:-3}"); do
                    python3 eval.py benchmark /tmp/within.txt --json "/tmp/within$i.json" > /dev/null || echo "run $i failed"
                done
                python3 -c "
import json, statistics, sys
runs = [json.load(open(f'/tmp/within{i}.json'))['cases'] for i in range(1, int(sys.argv[1]) + 1)]
for shape in dict.fromkeys(c['spec'] for c in runs[0]):
    per_run = [[c['stats']['mean'] / 1e3 for c in cases if c['spec'] == shape] for cases in runs]
    within = statistics.mean(statistics.stdev(v) / statistics.mean(v) * 100 for v in per_run)
    between = statistics.stdev([statistics.mean(v) for v in per_run]) / statistics.mean(sum(per_run, [])) * 100
    print(shape, ' | '.join(' '.join(f'{m:.2f}' for m in v) for v in per_run),
          f'| sd within a process {within:.2f}%, sd of process means {between:.2f}%')" "${RUNS:-3}" ;;
        sm100emu) timeout "${TESTS_S:-400}" python3 bench/sm100_emulation_check.py --build --quick --glue 2>&1 | tail -30 ;;
        *) echo "unknown step $step" ;;
    esac 2>&1 | tee -a "$LOG"
    echo "=== $step took $((SECONDS - start)) s" | tee -a "$LOG"
done
