#!/usr/bin/env bash
# Issue 18 on a GPU machine: `eval.py batch` over every GPU against the same batch on one GPU.
#   bash bench/batch_gpu.sh [setup] [sandbox] [single] [warm] [timing]
# setup:   Ray from .device/ (the device has no network: carry .device, made by hand from PyPI's cp312 wheels)
# sandbox: the GPU integrity tests under the worker's own network namespace
# single:  four submissions, each through a single `eval.py benchmark`, then the same four through a
#          one-GPU batch (times must agree within 2 %)
# warm:    17 submissions (8 GPU-bound: the shipped kernel and 7 byte-different copies, each its own build;
#          4 host-bound; 3 honest controls; 2 failing): `batch --mode test`, which builds every kernel
# timing:  `batch --mode benchmark` on GPU 0 alone (serial), then on every GPU; prints the per-submission
#          differences and the wall-clock ratio (two device calls: warm, then timing, while the machine is held)
OUT=${OUT:-out}; mkdir -p "$OUT"; export PYTHONUNBUFFERED=1
SUBS=$OUT/subs
steps=${*:-setup sandbox single batch}

make_subs() {
    rm -rf "$SUBS"; mkdir -p "$SUBS"
    cp submission.py "$SUBS/shipped_kernel.py"
    cp submissions/torch_reference.py "$SUBS/torch_reference.py"
    for i in 1 2 3 4 5 6 7; do      # distinct files (their own hash and private home), the same computation
        { cat submission.py; echo "# copy $i"; } > "$SUBS/shipped_kernel_copy$i.py"; done
    for i in 1 2 3; do
        { cat submissions/torch_reference.py; echo "# copy $i"; } > "$SUBS/torch_reference_copy$i.py"; done
    cp tests/exploits/_common.py tests/exploits/honest_fresh_output.py tests/exploits/honest_view_of_c.py \
       tests/exploits/honest_joined_thread.py "$SUBS/"
    cp tests/broken/_kernel.py tests/broken/zeros.py tests/submissions/crashes.py "$SUBS/"
}

for step in $steps; do case $step in
setup)
    python3 -c "import ray" 2>/dev/null || {
        python3 -m pip install -q --no-index --find-links .device/wheels jsonschema msgpack protobuf requests \
            filelock packaging pyyaml click 2>&1 | tail -2
        site=$(python3 -c "import site; print(site.getsitepackages()[0])")
        tar xJf .device/ray-slim.tar.xz -C "$site"; }
    python3 -c "import ray; print('ray', ray.__version__)" ;;
sandbox)
    timeout 300 python3 -m pytest -q -m gpu tests/test_integrity_gpu.py 2>&1 | tail -3 | tee "$OUT/sandbox.txt"
    python3 eval.py test --only 0 -q 2>&1 | grep -E "isolation|passed" | tee -a "$OUT/sandbox.txt" ;;
single)
    make_subs
    mkdir -p "$OUT/single"; rm -f "$OUT/single.jsonl"
    for f in shipped_kernel torch_reference honest_fresh_output zeros; do
        python3 eval.py benchmark -q --submission "$SUBS/$f.py" --json "$OUT/single/$f.json" > /dev/null 2>&1
        echo "single $f: exit $?"; done
    CUDA_VISIBLE_DEVICES=0 python3 eval.py batch "$SUBS/shipped_kernel.py" "$SUBS/torch_reference.py" \
        "$SUBS/honest_fresh_output.py" "$SUBS/zeros.py" --mode benchmark --jsonl "$OUT/single.jsonl" \
        > "$OUT/single_batch.txt" 2>&1; echo "one-GPU batch: exit $?"
    python3 bench/batch_compare.py --singles "$OUT/single" "$OUT/single.jsonl" ;;
warm)
    make_subs
    t=$SECONDS; python3 eval.py batch "$SUBS" --mode test --jsonl "$OUT/b_test.jsonl" > "$OUT/b_test.txt" 2>&1
    echo "batch test (builds): exit $?, $((SECONDS - t)) s" ;;
timing)
    [ -d "$SUBS" ] || make_subs
    rm -f "$OUT"/b_serial.jsonl "$OUT"/b_all.jsonl
    t=$SECONDS; CUDA_VISIBLE_DEVICES=0 python3 eval.py batch "$SUBS" --mode benchmark \
        --jsonl "$OUT/b_serial.jsonl" > "$OUT/b_serial.txt" 2>&1
    serial=$((SECONDS - t)); echo "batch benchmark on GPU 0 alone: exit $?, $serial s"
    if [ "$(nvidia-smi -L | wc -l)" -lt 2 ]; then       # one GPU: the serial run is all there is to see
        python3 bench/batch_compare.py "$OUT/b_serial.jsonl"; continue; fi
    t=$SECONDS; python3 eval.py batch "$SUBS" --mode benchmark --jsonl "$OUT/b_all.jsonl" > "$OUT/b_all.txt" 2>&1
    all=$((SECONDS - t)); echo "batch benchmark on every GPU: exit $?, $all s"
    python3 bench/batch_compare.py "$OUT/b_serial.jsonl" "$OUT/b_all.jsonl" ;;
esac; done
