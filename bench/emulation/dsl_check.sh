#!/usr/bin/env bash
# CuTe DSL and Triton submissions under --emulate-blackwell, on the GPU machine, from the repository root:
#
#   bash bench/emulation/dsl_check.sh            (FILES="task file" lines override the list; LIMIT caps a file's s;
#                                                 COMPETITORS=0 leaves out the competitors' files)
#
# Run it through `bash bench/run_gpu.sh emulation/dsl`, which first unpacks .whl/cp312-site.tar.xz (CuTe DSL and its
# cuda-python, made by bench/emulation/bring_wheels.sh dsl on a machine with the registry) into site-packages,
# where the jailed worker (`python -I`) imports them.
# Runs `eval.py test --emulate-blackwell` on the official CuTe DSL examples (.public-blackwell/official/, never
# committed; see its MANIFEST.txt) and our own look-alikes, and prints one row per file:
#   file | task | passed/total | seconds | first error line
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
OUT=${OUT:-out/dsl_check}
mkdir -p "$OUT"
python3 -c "import cutlass.cute" 2>/dev/null || echo "note: nvidia-cutlass-dsl is not importable (CuTe DSL rows will fail)"
python3 -c "import triton; print('triton', triton.__version__)" 2>/dev/null || echo "note: triton is not importable"

O=.public-blackwell/official
C=.public-blackwell/competitors
# Competitors' public CuTe DSL / Triton submissions (never committed; .public-blackwell/MANIFEST.txt says where each
# comes from). COMPETITORS=0 leaves them out.
COMPETITOR_FILES=". $C/teelaitila_nvfp4_gemm.py
. $C/triton_tma_dot_scaled_gemm.py
tasks/nvfp4_gemv $C/teelaitila_nvfp4_gemv.py
tasks/nvfp4_dual_gemm $C/teelaitila_dual_gemm_2cta.py
tasks/nvfp4_dual_gemm $C/teelaitila_dual_gemm_persistent.py
tasks/nvfp4_dual_gemm $C/arseni_dual_gemm.py
tasks/nvfp4_group_gemm $C/teelaitila_group_gemm.py
tasks/nvfp4_group_gemm $C/goldbar_group_gemm.py"
[ "${COMPETITORS:-1}" = 0 ] && COMPETITOR_FILES=""
FILES=${FILES:-". tests/blackwell/triton_lookalike.py
. tests/blackwell/cute_dsl_nvfp4_gemm.py
. $O/nvfp4_gemm_submission.py
tasks/nvfp4_gemv $O/nvfp4_gemv_template_cute.py
tasks/nvfp4_dual_gemm $O/nvfp4_dual_gemm_submission.py
tasks/nvfp4_group_gemm $O/nvfp4_group_gemm_submission.py
$COMPETITOR_FILES"}

row() {     # TASK FILE: one eval.py test run, one row
    local task=$1 file=$2 label start rc verdict
    label=$(basename "$file" .py)
    if [ ! -f "$file" ]; then echo "$file | $task | - | 0 | missing (fetch it: see .public-blackwell/MANIFEST.txt)"; return; fi
    start=$SECONDS
    timeout "${LIMIT:-540}" python3 eval.py test --emulate-blackwell -q --submission "$file" --task "$task" \
        --json "$OUT/$label.json" >"$OUT/$label.out" 2>&1
    rc=$?
    verdict=$(python3 bench/emulation/run_verdict.py "$OUT/$label.json" "$OUT/$label.out" "$rc" 300)
    echo "$file | $task | ${verdict%% | *} | $((SECONDS - start)) | ${verdict#* | }"
}

# All files at once (builds are CPU-bound; emulated runs are never timed), rows printed in the list's order.
n=0
while read -r task file; do
    [ -n "$task" ] || continue
    n=$((n + 1)); row "$task" "$file" >"$OUT/row.$n" &
done <<<"$FILES"
wait
echo "file | task | passed/total | seconds | first error line"
for i in $(seq 1 "$n"); do cat "$OUT/row.$i"; done
