# GPU steps for the evaluator's checks: exploits caught, the sandbox with CUDA, and diagnoses of broken kernels.
# Run through bench/run_gpu.sh (integrity/NAME).
integrity_DEFAULT="jail exploits diagnose"

integrity__exploits() {        # the GPU exploit suite and honest controls, one eval.py run each (1-2 min on an H100)
    python3 bench/integrity/gpu_check.py 2>&1 | tail -30
}

integrity__jail() {            # the jail on a GPU: shipped kernel in every mode, side stream, probe, CUDA IPC (~4 min)
    OUT="$OUT/jail" && mkdir -p "$OUT" && bash bench/integrity/jail_gpu_check.sh
}

integrity__diagnose() {        # every broken and honest submission through eval.py: the expected diagnosis?
    python3 bench/integrity/diagnose_gpu_check.py
}

integrity__diagnose_speed() {  # seconds the hypothesis engine takes on a large failing case
    python3 bench/integrity/diagnose_speed.py
}

integrity__ranked() {          # every timing forgery beside its honest control, then honest leaderboard runs
    python3 bench/integrity/ranked_check.py exploits 2>&1 | tail -12
    python3 bench/integrity/ranked_check.py honest --runs "${RUNS:-4}" 2>&1 | tail -20
}
