#!/usr/bin/env bash
# Issue 20 on a GPU machine: the progress a newcomer sees on a fresh machine (the first `test` builds the CUDA
# extension), a benchmark's report with its timing pictures, and a group GEMM failure's report. Everything
# lands in $OUT (progress lines, HTML reports, PNG plots) to be looked at (or rendered in Chromium) elsewhere.
OUT=${OUT:-out}; mkdir -p "$OUT"; export PYTHONUNBUFFERED=1
run() { local name=$1; shift; local t=$SECONDS
        python3 eval.py "$@" > "$OUT/$name.stdout" 2> "$OUT/$name.stderr"
        echo "$name: exit $?, $((SECONDS - t)) s, $(grep -c '^\[arena\]' "$OUT/$name.stderr") progress lines"; }
run test_fresh test --report "$OUT/test.html"
run bench benchmark --report "$OUT/bench.html" --plots "$OUT/bench_plots"
run group_tail test --task tasks/nvfp4_group_gemm --submission tests/broken/group_tail_unwritten.py \
    --report "$OUT/group_tail.html" --plots "$OUT/group_plots"
run diagnose_group diagnose --task tasks/nvfp4_group_gemm --submission tests/broken/group_rows_beyond_m.py
head -5 "$OUT/test_fresh.stderr"; tail -3 "$OUT/bench.stderr"; tail -4 "$OUT/diagnose_group.stdout"
