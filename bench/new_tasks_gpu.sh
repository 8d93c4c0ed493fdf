#!/usr/bin/env bash
# Issue 17 on a GPU machine: the two new tasks' CPU-CI test files (here on CUDA tensors), each task's example
# through test, robustness and benchmark, and the stage diagnosis of one planted bug each, on the GPU.
OUT=${OUT:-out}; mkdir -p "$OUT"; export PYTHONUNBUFFERED=1
timeout 420 python3 -m pytest -q tests/test_fp8_attention.py tests/test_nvfp4_moe.py 2>&1 | tail -4 | tee "$OUT/pytest.txt"
for task in fp8_attention nvfp4_moe; do
    sub=tasks/$task/torch_submission.py
    for set in tests robustness; do
        python3 eval.py test -q --task tasks/$task --submission $sub --set $set > "$OUT/${task}_$set.txt" 2>&1
        echo "$task $set: exit $?, $(tail -1 "$OUT/${task}_$set.txt")"; done
    python3 eval.py benchmark -q --task tasks/$task --submission $sub --json "$OUT/${task}_bench.json" \
        > "$OUT/${task}_bench.txt" 2>&1; echo "$task benchmark: exit $?"
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
python3 eval.py test -q --task tasks/fp8_attention --submission tests/broken/attn_k_heads_rows_swapped.py --only 2 \
    2>&1 | grep -o "Stage [a-z]*: [^;]*" | head -1
python3 eval.py test -q --task tasks/nvfp4_moe --submission tests/broken/moe_scales_blocked_as_plain.py --only 1 \
    2>&1 | grep -o "Stage [0-9] [^;]*" | head -1
