#!/bin/bash
# --emulate-blackwell on a Hopper GPU (device machine). Steps (default: all):
#   cpu      the rewriter/shim tests (tests/test_blackwell_emulation.py) on this machine's nvcc
#   kinds    tcgen05.mma kinds f16/tf32/f8f6f4/i8 and the 16x256b read, on our own kernel
#   exact    the shipped sm_100a path bit for bit, tests and benchmarks (bench/blackwell_emulation_exact.py)
#   shipped  the shipped submission.py (its sm_100a tcgen05 path) through eval.py test --emulate-blackwell
#   public   every file of .public19/ (public submissions, never committed; MANIFEST.tsv names the problem),
#            all at once; PUBLIC="f.py ..." picks files, ONLY=0,1 picks cases, LIMIT/CASE_LIMIT cap the seconds
#   CUTLASS headers for submissions that include them: .device/cutlass-include.tar.xz (carry .device)
# Prints one table at the end; JSON results land in $OUT (or /tmp/bwemu).
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-/tmp/bwemu}; mkdir -p "$OUT"
steps=${*:-cpu kinds shipped exact public}
if [ -f .device/cutlass-include.tar.xz ] && [ -z "$CUTLASS_PATH" ]; then
  mkdir -p /tmp/cutlass && tar xJf .device/cutlass-include.tar.xz -C /tmp/cutlass && export CUTLASS_PATH=/tmp/cutlass
fi
rows=()
task_for() { case "$1" in gemv) echo tasks/nvfp4_gemv;; dual_gemm) echo tasks/nvfp4_dual_gemm;;
             group_gemm) echo tasks/nvfp4_group_gemm;; *) echo .;; esac; }
run_one() {  # label submission task
  local label=$1 sub=$2 task=$3 start=$SECONDS
  timeout "${LIMIT:-560}" python3 eval.py test --emulate-blackwell -q --timeout "${CASE_LIMIT:-400}" \
      ${ONLY:+--only "$ONLY"} --submission "$sub" --task "$task" --json "$OUT/$label.json" > "$OUT/$label.log" 2>&1
  local rc=$? secs=$((SECONDS - start))
  local verdict
  verdict=$(python3 - "$OUT/$label.json" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"no json ({e.__class__.__name__})"); sys.exit()
cases = d.get("cases") or d.get("results") or []
ok = sum(1 for c in cases if c.get("passed"))
first = next((c.get("error") or c.get("diagnosis") for c in cases if not c.get("passed")), "")
print(f"{ok}/{len(cases)} passed" + (f"; first error: {str(first)[:300]}" if first else ""))
PY
)
  echo "$label | rc $rc | ${secs}s | $verdict" > "$OUT/$label.row"
  rows+=("$label | rc $rc | ${secs}s | $verdict")
  grep -m3 -E "emulate-blackwell|notice: --emulate" "$OUT/$label.log" | cut -c1-300
}
for step in $steps; do
  case $step in
    cpu) timeout 300 python3 -m pytest -q tests/test_blackwell_emulation.py 2>&1 | tail -3 ;;
    kinds) timeout 300 python3 bench/blackwell_emulation_kinds.py 2>&1 | grep -v Warning | tail -6 ;;
    exact) timeout 400 python3 bench/blackwell_emulation_exact.py --bench 2>&1 | tail -15 ;;
    shipped) run_one shipped submission.py . ;;
    public)
      [ -f .public19/MANIFEST.tsv ] || { echo "no .public19/MANIFEST.tsv"; continue; }
      # columns by header name; PUBLIC="a.py b.py" picks files; all run at once (builds are CPU-bound,
      # emulated runs are never timed, so sharing the GPU costs nothing but wall time)
      python3 - > "$OUT/list.tsv" <<'PY'
import csv, os
rows = csv.DictReader(open(".public19/MANIFEST.tsv"), delimiter="\t")
pick = os.environ.get("PUBLIC", "").split()
for row in rows:
    if (not pick or row["file"] in pick) and os.path.isfile(".public19/" + row["file"]):
        print(row["file"], row["problem"], sep="\t")
PY
      while IFS=$'\t' read -r file problem; do
        run_one "pub_${file%.py}" ".public19/$file" "$(task_for "$problem")" &
      done < "$OUT/list.tsv"
      wait
      for log in "$OUT"/pub_*.row; do rows+=("$(cat "$log")"); done ;;
  esac
done
echo; echo "=== --emulate-blackwell on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
printf '%s\n' "${rows[@]}"
