# GPU steps for `eval.py batch`: Ray on the device, the jail's GPU and core fences, single runs against a batch,
# a benchmark batch on 1, 2 and 4 GPUs of one machine, the emulated public corpus as one batch. Run through
# bench/run_gpu.sh (batch/NAME). The device machine has no network: `setup` installs Ray from .device/ (made by
# bench/batch/bring_ray.sh: .device/ray-wheels and .device/ray-site.tar.xz; carry .device).
# Submissions are written to $OUT/subs: the shipped kernel and 7 byte-different copies (8 GPU-bound, each its own
# build), torch_reference and 3 copies (host-bound), 3 honest exploit controls, 2 failing (zeros, crashes).
batch_DEFAULT="setup fences single warm timing"

batch__setup() {    # Ray from .device/ unless it is installed
    python3 -c "import ray" 2>/dev/null || {
        python3 -m pip install -q --no-index --find-links .device/ray-wheels jsonschema msgpack protobuf requests \
            filelock packaging pyyaml click 2>&1 | tail -2
        tar xJf .device/ray-site.tar.xz -C "$(python3 -c "import site; print(site.getsitepackages()[0])")"; }
    python3 -c "import ray; print('ray', ray.__version__)"
}

batch__fences() {   # a submission reaches no other GPU and cannot widen its cores; with BEFORE=DIR (a copy of the
                    # checkout at an earlier commit), the same look-alikes there first
    local where
    for where in ${BEFORE:+$BEFORE} .; do
        echo "--- in $where"
        ( cd "$where" && timeout 280 python3 -m pytest -q -p no:cacheprovider -m "gpu or not gpu" \
            tests/test_integrity_gpu.py::test_a_submission_reaches_no_other_gpu \
            tests/test_jail.py::test_a_submission_cannot_widen_the_cores_it_was_started_on 2>&1 \
            | grep -E "^E +(assert|AssertionError)|passed|failed|skipped" | cut -c1-300 )
    done
}

batch__sandbox() {  # the GPU integrity tests with the worker in its own network namespace
    timeout 300 python3 -m pytest -q -m gpu tests/test_integrity_gpu.py 2>&1 | tail -3
    python3 eval.py test --only 0 -q 2>&1 | grep -E "isolation|passed"
}

batch__single() {   # four submissions through single `eval.py benchmark` runs, then through a one-GPU batch
    local f
    _make_subs
    mkdir -p "$OUT/single"; rm -f "$OUT/single.jsonl"
    for f in shipped_kernel torch_reference honest_fresh_output zeros; do
        python3 eval.py benchmark -q --submission "$OUT/subs/$f.py" --json "$OUT/single/$f.json" >/dev/null 2>&1
        echo "single $f: exit $?"
    done
    CUDA_VISIBLE_DEVICES=0 python3 eval.py batch "$OUT/subs/shipped_kernel.py" "$OUT/subs/torch_reference.py" \
        "$OUT/subs/honest_fresh_output.py" "$OUT/subs/zeros.py" --mode benchmark --jsonl "$OUT/single.jsonl" \
        >"$OUT/single_batch.txt" 2>&1
    echo "one-GPU batch: exit $?"
    python3 bench/batch/batch_compare.py --singles "$OUT/single" "$OUT/single.jsonl"
}

batch__warm() {     # `batch --mode test` over every submission, which builds every kernel
    local t=$SECONDS
    _make_subs
    python3 eval.py batch "$OUT/subs" --mode test --jsonl "$OUT/b_test.jsonl" >"$OUT/b_test.txt" 2>&1
    echo "batch test (builds): exit $?, $((SECONDS - t)) s"
}

batch__timing() {   # `batch --mode benchmark` on GPU 0 alone, then on every GPU: differences and wall-clock ratio
    local t=$SECONDS rc
    [ -d "$OUT/subs" ] || _make_subs
    rm -f "$OUT"/b_serial.jsonl "$OUT"/b_all.jsonl
    CUDA_VISIBLE_DEVICES=0 python3 eval.py batch "$OUT/subs" --mode benchmark --jsonl "$OUT/b_serial.jsonl" \
        >"$OUT/b_serial.txt" 2>&1
    rc=$?; echo "batch benchmark on GPU 0 alone: exit $rc, $((SECONDS - t)) s"
    if [ "$(nvidia-smi -L | wc -l)" -lt 2 ]; then       # one GPU: the serial run is all there is to see
        python3 bench/batch/batch_compare.py "$OUT/b_serial.jsonl"; return; fi
    t=$SECONDS
    python3 eval.py batch "$OUT/subs" --mode benchmark --jsonl "$OUT/b_all.jsonl" >"$OUT/b_all.txt" 2>&1
    rc=$?; echo "batch benchmark on every GPU: exit $rc, $((SECONDS - t)) s"
    python3 bench/batch/batch_compare.py "$OUT/b_serial.jsonl" "$OUT/b_all.jsonl"
}

batch__scaling() {  # SCALING_FILES (16) GPU-bound submissions (byte-different copies of the shipped kernel, each its own build):
                    # `build` them (`--mode test` on every GPU), time them with `--mode benchmark` on `all` GPUs,
                    # and on GPU 0 alone (`one`, on as many cores as each evaluation of `all` gets); then the wall
                    # times and every figure against the one-GPU batch. SCALING_PARTS (default "build all one").
                    # SCALING_ONE=A-B gives `one` the copies A to B alone: a one-GPU batch longer than a call's
                    # limit is timed in parts (their s_one_A-B.jsonl files compared with batch_compare.py after).
    local subs=$OUT/gpu16 i t part gpus cores one_subs=$OUT/gpu16 one_rows=$OUT/s_one.jsonl
    gpus=$(nvidia-smi -L | wc -l); cores=$(nproc)
    rm -rf "$subs"; mkdir -p "$subs"
    for i in $(seq 1 "${SCALING_FILES:-16}"); do
        { cat submission.py; echo "# copy $(printf %02d "$i")"; } >"$subs/kernel_$(printf %02d "$i").py"; done
    if [ -n "${SCALING_ONE:-}" ]; then
        one_subs=$OUT/gpu16_$SCALING_ONE; one_rows=$OUT/s_one_$SCALING_ONE.jsonl
        rm -rf "$one_subs"; mkdir -p "$one_subs"
        for i in $(seq "${SCALING_ONE%-*}" "${SCALING_ONE#*-}"); do
            cp "$subs/kernel_$(printf %02d "$i").py" "$one_subs/"; done
    fi
    for part in ${SCALING_PARTS:-build all one}; do
        t=$SECONDS; rm -f "$OUT/s_$part.jsonl"
        case $part in
            build) python3 eval.py batch "$subs" --mode test --jsonl "$OUT/s_build.jsonl" >"$OUT/s_build.txt" 2>&1 ;;
            all) python3 eval.py batch "$subs" --mode benchmark --jsonl "$OUT/s_all.jsonl" >"$OUT/s_all.txt" 2>&1 ;;
            one) rm -f "$one_rows"
                 CUDA_VISIBLE_DEVICES=0 taskset -c 0-$((cores / gpus - 1)) python3 eval.py batch "$one_subs" \
                     --mode benchmark --jsonl "$one_rows" >"$OUT/s_one.txt" 2>&1 ;;
        esac
        echo "scaling $part: exit $?, $((SECONDS - t)) s on $gpus GPU(s), $cores cores"
        grep -h "^wall time\|submission(s) on" "$OUT/s_$part.txt"
    done
    if [ -f "$OUT/s_one.jsonl" ] && [ -f "$OUT/s_all.jsonl" ]; then
        echo "--- GPU 0 alone against all $gpus GPUs"
        python3 bench/batch/batch_compare.py "$OUT/s_one.jsonl" "$OUT/s_all.jsonl" | tail -25
    fi
}

batch__corpus() {   # the public corpus (.public-blackwell, carried) as one `batch --mode test --emulate-blackwell`
                    # over every GPU, once per packing in PACKINGS (evaluations at once per GPU; default "4");
                    # the manifest is made from the corpus's own (CORPUS_ONLY / CORPUS_SKIP: comma-separated
                    # files, CORPUS_FIRST: the first N left); CUTLASS's headers from .device/cutlass-include.tar.xz
    local manifest=$OUT/corpus_manifest.tsv t per
    if [ -f .device/cutlass-include.tar.xz ] && [ -z "${CUTLASS_PATH:-}" ]; then   # CUTLASS, as the runners have it
        mkdir -p /tmp/cutlass && tar xJf .device/cutlass-include.tar.xz -C /tmp/cutlass && export CUTLASS_PATH=/tmp/cutlass
    fi
    python3 bench/batch/corpus_manifest.py --out "$manifest" --only "${CORPUS_ONLY:-}" --skip "${CORPUS_SKIP:-}" \
        --first "${CORPUS_FIRST:-0}" || return 1
    for per in ${PACKINGS:-4}; do
        t=$SECONDS
        python3 eval.py batch --manifest "$manifest" --mode test --emulate-blackwell --per-gpu "$per" \
            --jsonl "$OUT/corpus_$per.jsonl" >"$OUT/corpus_$per.txt" 2>&1
        echo "corpus batch, $per per GPU: exit $?, $((SECONDS - t)) s"
        grep -E "^(agreement|wall time)" "$OUT/corpus_$per.txt"
    done
}

_make_subs() {
    local subs=$OUT/subs i
    rm -rf "$subs"; mkdir -p "$subs"
    cp submission.py "$subs/shipped_kernel.py"
    cp submissions/torch_reference.py "$subs/torch_reference.py"
    for i in 1 2 3 4 5 6 7; do      # distinct files (their own hash and private home), the same computation
        { cat submission.py; echo "# copy $i"; } >"$subs/shipped_kernel_copy$i.py"; done
    for i in 1 2 3; do
        { cat submissions/torch_reference.py; echo "# copy $i"; } >"$subs/torch_reference_copy$i.py"; done
    cp tests/exploits/_common.py tests/exploits/honest_fresh_output.py tests/exploits/honest_view_of_c.py \
       tests/exploits/honest_joined_thread.py "$subs/"
    cp tests/broken/_kernel.py tests/broken/zeros.py tests/submissions/crashes.py "$subs/"
}
