# GPU steps for the Hopper kernel of submission.py: build, bit-exactness, speed against cuBLAS, configurations,
# probe builds, races, micro-benchmarks, Nsight Compute. Run through bench/run_gpu.sh (kernel/NAME).
# Settings: REPS (30), CONFIGS (MB:C[:G],...), VARIANTS (NAME=MACRO=V[+...] or NAME=@FILE, ...), PROBES
# (NVFP4_PROFILE_MODE values), STRESS_CALLS (40), MICROS (programs of bench/kernel/micro, default wgmma_rate),
# SHAPES (M:N:K ... for ncu).
kernel_DEFAULT="kernel configs eval gputests stress"

kernel__kernel() {    # build, the 24 bit-exactness checks, and the timing table against cuBLAS bf16 / FP8
    python3 bench/kernel/hopper_gemm.py --reps "${REPS:-30}"
}

kernel__configs() {   # forced (MB, cluster, groups) configurations of the shipped build, and VARIANTS builds
    python3 bench/kernel/hopper_gemm.py --reps "${REPS:-30}" --no-checks \
        --configs "${CONFIGS:-1:1,2:1,1:2,2:2,1:4,2:4,1:8,2:8}" ${VARIANTS:+--variants "$VARIANTS"}
}

kernel__probes() {    # probe builds (wrong results, timing only): where the time goes
    python3 bench/kernel/hopper_gemm.py --reps "${REPS:-30}" --no-checks ${PROBES:+--probes "$PROBES"} \
        ${VARIANTS:+--variants "$VARIANTS"}
}

kernel__eval() {      # the evaluator's own runs: test, robustness, benchmark (competition method)
    python3 eval.py test -q || echo "test failed"
    python3 eval.py test -q --set robustness || echo "robustness failed"
    python3 eval.py benchmark
}

kernel__gputests() {  # the submission's GPU tests (forced configurations, repeated calls, bit-exactness)
    python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_submission_source.py
}

kernel__stress() {    # every cluster configuration STRESS_CALLS times: races show as occasional wrong calls
    python3 bench/kernel/cluster_stress.py --calls "${STRESS_CALLS:-40}"
}

kernel__micro() {     # the micro-benchmarks of bench/kernel/micro named in MICROS
    local m
    for m in ${MICROS:-wgmma_rate}; do
        echo "== $m"
        nvcc -O3 -gencode=arch=compute_90a,code=sm_90a "bench/kernel/micro/$m.cu" -o "/tmp/$m" && "/tmp/$m" || return 1
    done
}

kernel__ncu() {       # Nsight Compute stall samples per SASS instruction for SHAPES, summarised
    local shape
    bash bench/kernel/ncu_source.sh ${SHAPES:-2304:4608:7168 128:4096:7168}
    for shape in ${SHAPES:-2304:4608:7168 128:4096:7168}; do
        python3 bench/kernel/ncu_source_summary.py "$OUT/ncu_${shape//:/x}.csv"
    done
}
