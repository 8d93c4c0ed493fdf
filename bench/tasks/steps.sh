# GPU steps for the tasks: references against the competition's, each task's example, our own tasks, public
# submissions, and what a user sees (progress, reports). Run through bench/run_gpu.sh (tasks/NAME).
# reference needs the competition's reference files in .official/<task>_reference.py (carried, never committed);
# public needs .public/ (public submissions with a MANIFEST.tsv, never committed).
tasks_DEFAULT="reference tasks own"

tasks__reference() {  # our generate_input against the competition's, and ref_kernel against an fp64 GEMM
    python3 bench/tasks/reference_vs_official.py
}

tasks__tasks() {      # every NVFP4 task's tests and robustness set with its example submission
    python3 bench/tasks/tasks_gpu_check.py
}

tasks__own() {        # fp8_attention and nvfp4_moe: their tests on CUDA, examples, benchmarks, one planted bug each
    local task set
    timeout 420 python3 -m pytest -q tests/test_fp8_attention.py tests/test_nvfp4_moe.py 2>&1 | tail -4
    for task in fp8_attention nvfp4_moe; do
        local sub=tasks/$task/torch_submission.py
        for set in tests robustness; do
            python3 eval.py test -q --task tasks/$task --submission $sub --set $set >"$OUT/${task}_$set.txt" 2>&1
            echo "$task $set: exit $?, $(tail -1 "$OUT/${task}_$set.txt")"
        done
        python3 eval.py benchmark -q --task tasks/$task --submission $sub --json "$OUT/${task}_bench.json" \
            >"$OUT/${task}_bench.txt" 2>&1
        echo "$task benchmark: exit $?"
        python3 - "$OUT/${task}_bench.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(f"  {d['system'].get('gpu')}; geomean {d.get('geomean_us')} us")
for c in d["cases"]:
    s = c.get("stats") or {}
    print(f"  {c['spec']}: {'pass' if c['passed'] else 'FAIL ' + c['error'][:80]}"
          + (f", {s['mean'] / 1e3:.1f} +- {s['err'] / 1e3:.1f} us over {s['runs']} runs, SOL {c.get('sol_us')} us" if s else ""))
PY
    done
    python3 eval.py test -q --task tasks/fp8_attention --submission tests/broken/attn_k_heads_rows_swapped.py \
        --only 2 2>&1 | grep -o "Stage [a-z]*: [^;]*" | head -1
    python3 eval.py test -q --task tasks/nvfp4_moe --submission tests/broken/moe_scales_blocked_as_plain.py \
        --only 1 2>&1 | grep -o "Stage [0-9] [^;]*" | head -1
}

tasks__public() {     # the public submissions of .public/ through eval.py test, unchanged
    python3 bench/tasks/public_submissions.py .public --jobs 8 --out "$OUT/public_gpu.tsv"
}

tasks__report() {     # progress on a fresh machine, a benchmark's HTML report and plots, a group GEMM failure's report
    _eval_run() {
        local name=$1 t=$SECONDS; shift
        python3 eval.py "$@" >"$OUT/$name.stdout" 2>"$OUT/$name.stderr"
        echo "$name: exit $?, $((SECONDS - t)) s, $(grep -c '^\[arena\]' "$OUT/$name.stderr") progress lines"
    }
    _eval_run test_fresh test --report "$OUT/test.html"
    _eval_run bench benchmark --report "$OUT/bench.html" --plots "$OUT/bench_plots"
    _eval_run group_tail test --task tasks/nvfp4_group_gemm --submission tests/broken/group_tail_unwritten.py \
        --report "$OUT/group_tail.html" --plots "$OUT/group_plots"
    _eval_run diagnose_group diagnose --task tasks/nvfp4_group_gemm --submission tests/broken/group_rows_beyond_m.py
    head -5 "$OUT/test_fresh.stderr"; tail -3 "$OUT/bench.stderr"; tail -4 "$OUT/diagnose_group.stdout"
}
