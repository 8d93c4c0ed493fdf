#!/usr/bin/env bash
# Where the Hopper kernel's warps stall, per SASS instruction (Nsight Compute source counters), for a few
# shapes of submission.py's per-shape configuration. Writes $OUT/ncu_<M>x<N>x<K>.csv (the source page: one
# row per SASS instruction with its stall samples) and prints the warp-state summary.
# Usage (repo root, on the GPU machine): bash bench/kernel/ncu_source.sh [M:N:K ...]
set -u
OUT=${OUT:-out}; mkdir -p "$OUT"
for shape in ${*:-2304:4608:7168 128:4096:7168}; do
    IFS=: read -r m n k <<<"$shape"
    rep="$OUT/ncu_${m}x${n}x${k}"
    ncu --kernel-name regex:gemm_kernel --launch-skip 2 --launch-count 1 --section WarpStateStats \
        --section SourceCounters --section SpeedOfLight -f -o "$rep" python3 bench/kernel/hopper_ncu.py "$m" "$n" "$k" \
        >"$rep.log" 2>&1 || { echo "ncu failed for $shape"; tail -5 "$rep.log"; continue; }
    ncu --import "$rep.ncu-rep" --page source --csv --print-source sass >"$rep.csv" 2>"$rep.err" || tail -3 "$rep.err"
    ncu --import "$rep.ncu-rep" --page details --section WarpStateStats --section SpeedOfLight 2>&1 | \
        grep -E "Duration|Stall|Warp Cycles|Issued|Throughput" | head -30
    rm -f "$rep.ncu-rep"
    echo "== $shape: $(wc -l <"$rep.csv") source rows"
done
