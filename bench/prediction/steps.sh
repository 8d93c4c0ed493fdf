# The B200 time model against public per-shape B200 times (bench/prediction/calibrate.py, docs/b200_prediction.md).
# shellcheck shell=bash
prediction_DEFAULT="calibration"

prediction__calibration() {    # eval.py predict on every file of calibration.tsv, then the fit and its held-out check
    local gpus
    gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader | paste -sd, -)
    python3 bench/prediction/calibrate.py run --jobs "${JOBS:-8}" --gpus "$gpus" --per-gpu "${PER_GPU:-3}" \
        --limit "${LIMIT:-400}" \
        --out "$OUT/prediction" ${KINDS:+--kinds "$KINDS"}
    python3 bench/prediction/calibrate.py fit "$OUT/prediction"
}
