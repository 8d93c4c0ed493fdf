# GPU steps for the evaluator's checks: exploits caught, the sandbox with CUDA, and diagnoses of broken kernels.
# Run through bench/run_gpu.sh (integrity/NAME).
integrity_DEFAULT="exploits diagnose"

integrity__exploits() {        # the GPU exploit suite and honest controls, one eval.py run each (1-2 min on an H100)
    python3 bench/integrity_gpu_check.py 2>&1 | tail -30
}

integrity__sandbox() {         # the shipped kernel through every mode in the sandbox, exploits, CUDA IPC suites
    OUT="$OUT/sandbox" && mkdir -p "$OUT" && bash bench/sandbox_gpu_check.sh
}

integrity__diagnose() {        # every broken and honest submission through eval.py: the expected diagnosis?
    python3 bench/integrity/diagnose_gpu_check.py
}

integrity__diagnose_speed() {  # seconds the hypothesis engine takes on a large failing case
    python3 bench/integrity/diagnose_speed.py
}
