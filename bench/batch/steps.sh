# GPU steps for `eval.py batch`: Ray on the device, single runs against a batch, a batch over every GPU.
# Run through bench/run_gpu.sh (batch/NAME). The device machine has no network: `setup` installs Ray from
# .device/ (made by hand from PyPI's cp312 wheels: .device/wheels and .device/ray-slim.tar.xz; carry .device).
# Submissions are written to $OUT/subs: the shipped kernel and 7 byte-different copies (8 GPU-bound, each its own
# build), torch_reference and 3 copies (host-bound), 3 honest exploit controls, 2 failing (zeros, crashes).
batch_DEFAULT="setup sandbox single warm timing"

batch__setup() {    # Ray from .device/ unless it is installed
    python3 -c "import ray" 2>/dev/null || {
        python3 -m pip install -q --no-index --find-links .device/wheels jsonschema msgpack protobuf requests \
            filelock packaging pyyaml click 2>&1 | tail -2
        tar xJf .device/ray-slim.tar.xz -C "$(python3 -c "import site; print(site.getsitepackages()[0])")"; }
    python3 -c "import ray; print('ray', ray.__version__)"
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
