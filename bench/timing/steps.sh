# GPU steps that check the timing method: its cost, its spread, and the competition's harness beside it.
# Run through bench/run_gpu.sh (timing/NAME). The side_* steps need the competition's eval_better_bench.py and
# utils.py in .official/ (fetched by you from gpu-mode/reference-kernels, carried, never committed).
timing_DEFAULT="overhead torch_spread kernel_spread"

timing__overhead() {      # the flush, the GPU wait and an empty timed window, per timed call
    python3 bench/timing/timing_overhead.py
}

timing__torch_spread() {  # the host-bound PyTorch submission: test, then three benchmarks and their spread
    local sub=submissions/torch_reference.py
    python3 eval.py test -q --submission $sub || echo "test failed"
    for i in 1 2 3; do python3 eval.py benchmark -q --submission $sub --json "$OUT/torch_bench$i.json" >/dev/null; done
    python3 bench/timing/benchmark_spread.py "$OUT"/torch_bench{1,2,3}.json
}

timing__kernel_spread() { # the shipped kernel: test, robustness, three benchmarks and their spread, a leaderboard run
    python3 eval.py test -q || echo "test failed"
    python3 eval.py test -q --set robustness || echo "robustness failed"
    for i in 1 2 3; do python3 eval.py benchmark -q --json "$OUT/kernel_bench$i.json" >/dev/null; done
    python3 bench/timing/benchmark_spread.py "$OUT"/kernel_bench{1,2,3}.json
    python3 eval.py leaderboard --max-runs 300 | tail -5
}

timing__side_kernel() {   # the shipped kernel under both harnesses, RUNS runs each, alternating
    timeout "${SIDE_S:-540}" python3 bench/timing/official_side_by_side.py --official-eval \
        .official/eval_better_bench.py --runs "${RUNS:-5}" --json "$OUT/side_kernel.json" submission.py
}

timing__side_torch() {    # the host-heavy PyTorch submission under both harnesses, and ours --no-sandbox
    timeout "${SIDE_S:-540}" python3 bench/timing/official_side_by_side.py --official-eval \
        .official/eval_better_bench.py --runs "${RUNS:-5}" --also-no-sandbox \
        --json "$OUT/side_torch.json" submissions/torch_reference.py
}

timing__wall() {          # two benchmarks of the shipped kernel: wall time and where it went (the first builds)
    for i in 1 2; do
        python3 - "$OUT/wall$i.json" <<'PY'
import json, subprocess, sys, time
t = time.perf_counter()
rc = subprocess.run([sys.executable, "eval.py", "benchmark", "--json", sys.argv[1]], stdout=subprocess.DEVNULL).returncode
print(f"eval.py benchmark: exit {rc}, {time.perf_counter() - t:.1f} s wall")
d = json.load(open(sys.argv[1]))
print("wall_s", d["system"]["wall_s"])
for c in d["cases"]:
    print(c["spec"], c["stats"]["runs"], round(c["stats"]["mean"] / 1e3, 2), c["timing"].get("harness_s"), c["warnings"])
PY
    done
}

timing__repeat() {        # RUNS benchmarks of the shipped kernel back to back: per-run means and spread
    local files=()
    for i in $(seq "${RUNS:-5}"); do
        python3 eval.py benchmark -q --json "$OUT/repeat$i.json" >/dev/null || echo "run $i failed"
        files+=("$OUT/repeat$i.json")
    done
    python3 bench/timing/benchmark_spread.py "${files[@]}"
}

timing__within() {        # RUNS processes, each timing every benchmark shape 3 times, interleaved
    : >"$OUT/within.txt"
    for r in 1 2 3; do for shape in "n: 7168; k: 16384" "n: 4096; k: 7168" "n: 7168; k: 2048"; do
        echo "m: 128; $shape; l: 1; seed: 1111" >>"$OUT/within.txt"; done; done
    for i in $(seq "${RUNS:-3}"); do
        python3 eval.py benchmark "$OUT/within.txt" --json "$OUT/within$i.json" >/dev/null || echo "run $i failed"
    done
    python3 - "$OUT" "${RUNS:-3}" <<'PY'
import json, statistics, sys
runs = [json.load(open(f"{sys.argv[1]}/within{i}.json"))["cases"] for i in range(1, int(sys.argv[2]) + 1)]
for shape in dict.fromkeys(c["spec"] for c in runs[0]):
    per_run = [[c["stats"]["mean"] / 1e3 for c in cases if c["spec"] == shape] for cases in runs]
    within = statistics.mean(statistics.stdev(v) / statistics.mean(v) * 100 for v in per_run)
    between = statistics.stdev([statistics.mean(v) for v in per_run]) / statistics.mean(sum(per_run, [])) * 100
    print(shape, " | ".join(" ".join(f"{m:.2f}" for m in v) for v in per_run),
          f"| sd within a process {within:.2f}%, sd of process means {between:.2f}%")
PY
}
