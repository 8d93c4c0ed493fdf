# GPU steps for --emulate-blackwell and the sm_100a kernel's emulation build, on a Hopper GPU (correctness only).
# Run through bench/run_gpu.sh (emulation/NAME). The public step reads .public-blackwell/ (public submissions,
# never committed; MANIFEST.tsv names each file's problem): PUBLIC="f.py ..." picks files, ONLY=0,1 picks cases,
# LIMIT / CASE_LIMIT cap the seconds of a file / a case. CUTLASS headers for submissions that include them:
# .device/cutlass-include.tar.xz (carry .device).
emulation_DEFAULT="cpu kinds shipped exact public"

emulation__cpu() {      # the rewriter and shim tests, on the device's nvcc
    python3 -m pytest -q tests/test_blackwell_emulation.py 2>&1 | tail -3
}

emulation__kinds() {    # tcgen05.mma kinds f16/tf32/f8f6f4 (e4m3; packed e2m1 x e3m2)/i8 and the 16x256b read, our one-MMA kernel
    python3 bench/emulation/blackwell_emulation_kinds.py 2>&1 | grep -v Warning | tail -8
}

emulation__ld_st_tables() {   # tcgen05.ld/st fragment tables (.x1-.x8, both 16-lane halves) and cp 4x256b vs the ISA
    python3 bench/emulation/ld_st_tables_check.py 2>&1 | grep -v Warning | tail -12
    return "${PIPESTATUS[0]}"
}

emulation__st_order() {   # tcgen05.st of scale factors by four warps vs one warp's MMA (and an earlier copy), in five orders
    python3 bench/emulation/st_order_check.py 2>&1 | grep -v Warning | tail -7
    return "${PIPESTATUS[0]}"
}

emulation__alloc() {   # alloc: column 0 without reading the result (one CTA per SM); a deadlock named; contended waits
    python3 bench/emulation/alloc_check.py 2>&1 | grep -v Warning | tail -3
    return "${PIPESTATUS[0]}"
}

emulation__exact() {    # the shipped sm_100a path bit for bit, tests and benchmarks, in one process
    python3 bench/emulation/blackwell_emulation_exact.py --bench 2>&1 | tail -15
}

emulation__shipped() {  # the shipped submission.py (its sm_100a path) through eval.py test --emulate-blackwell
    _emulated_test shipped submission.py .
    cat "$OUT/emu_shipped.row"
}

emulation__isa() {      # descriptor rules, scale quarters and lint (bench/emulation/async_check.sh's table)
    bash bench/emulation/async_check.sh
}

emulation__sm100() {    # the sm_100a kernel's emulation build (library and submission glue), test shapes
    python3 bench/emulation/sm100_emulation_check.py --build --quick --glue 2>&1 | tail -30
}

emulation__public() {   # every file of .public-blackwell/ at once through eval.py test --emulate-blackwell
    local dir=.public-blackwell file problem
    [ -f $dir/MANIFEST.tsv ] || { echo "no $dir/MANIFEST.tsv"; return 1; }
    _cutlass
    python3 - $dir >"$OUT/emu_list.tsv" <<'PY'
import csv, os, sys
pick = os.environ.get("PUBLIC", "").split()
for row in csv.DictReader(open(os.path.join(sys.argv[1], "MANIFEST.tsv")), delimiter="\t"):
    if (not pick or row["file"] in pick) and os.path.isfile(os.path.join(sys.argv[1], row["file"])):
        print(row["file"], row["problem"], sep="\t")
PY
    # all at once: builds are CPU-bound and emulated runs are never timed, so sharing the GPU costs only wall time
    while IFS=$'\t' read -r file problem; do
        _emulated_test "pub_$(basename "${file%.py}")" "$dir/$file" "$(_task_for "$problem")" &
    done <"$OUT/emu_list.tsv"
    wait
    cat "$OUT"/emu_pub_*.row
}

emulation__agreement() {    # the public corpus's verdicts beside its B200 evidence (bench/emulation/public_agreement.py)
    _cutlass
    local gpus
    gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader | paste -sd, -)
    python3 bench/emulation/public_agreement.py --jobs "${JOBS:-16}" --gpus "$gpus" --limit "${LIMIT:-540}" \
        --out "$OUT/agreement" ${PUBLIC:-}
}

_task_for() {
    case "$1" in gemv) echo tasks/nvfp4_gemv ;; dual_gemm) echo tasks/nvfp4_dual_gemm ;;
                 group_gemm) echo tasks/nvfp4_group_gemm ;; *) echo . ;; esac
}

_cutlass() {
    if [ -f .device/cutlass-include.tar.xz ] && [ -z "${CUTLASS_PATH:-}" ]; then
        mkdir -p /tmp/cutlass && tar xJf .device/cutlass-include.tar.xz -C /tmp/cutlass && export CUTLASS_PATH=/tmp/cutlass
    fi
}

_emulated_test() {      # LABEL SUBMISSION TASK: one eval.py test run; its row goes to $OUT/emu_LABEL.row
    local label=$1 sub=$2 task=$3 start=$SECONDS rc verdict
    _cutlass
    timeout "${LIMIT:-560}" python3 eval.py test --emulate-blackwell -q --timeout "${CASE_LIMIT:-400}" \
        ${ONLY:+--only "$ONLY"} --submission "$sub" --task "$task" --json "$OUT/emu_$label.json" \
        >"$OUT/emu_$label.out" 2>&1
    rc=$?
    verdict=$(python3 - "$OUT/emu_$label.json" <<'PY'
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
    echo "$label | rc $rc | $((SECONDS - start))s | $verdict" >"$OUT/emu_$label.row"
    grep -m3 -E "emulate-blackwell|notice: --emulate" "$OUT/emu_$label.out" | cut -c1-300
}

emulation__dsl() {      # CuTe DSL and Triton submissions (official examples in .public-blackwell/official, look-alikes)
    bash bench/emulation/dsl_check.sh
}

emulation__cutlass() {  # our own CUTLASS 4.2 SM100 NVFP4 GEMM (tests/submissions/cutlass_sm100_nvfp4.py), one row
    bash bench/emulation/cutlass_check.sh
}

emulation__planted() {  # the planted tcgen05 bugs of tests/blackwell/planted.py, each named in one line
    bash bench/emulation/planted_check.sh
}
