#!/usr/bin/env bash
# The one runner of the bench's GPU steps: runs each named step with a time limit, logs it, prints a summary.
#
#   bash bench/run_gpu.sh STEP ...        (on the GPU machine; from any folder)
#   bash bench/run_gpu.sh list            every step, with its group's defaults
#
# STEP is GROUP/NAME (one step of bench/GROUP/steps.sh), GROUP alone (that group's default steps), `gputests`
# (`pytest -m gpu` over tests/) or `evaluator` (the evaluator's whole check in one call, see below).
# Steps read their settings from the environment (REPS, CONFIGS, RUNS, ...: bench/README.md names them).
#
# Output: $OUT (default out/) gets GROUP_NAME.log per step, written as it runs (a call cut off by its own time
# limit still returns what it measured), all.log with every step's log, and summary.txt: the GPU, then one row
# per step (exit status, seconds, last line), also printed at the end. STEP_TIMEOUT (default 590 s) caps a step;
# the whole process group of a step is ended at the limit. Python wheels the machine lacks travel in .whl/ and are
# installed into /tmp/site first; .whl/cpXY-site.tar.xz (bench/emulation/bring_wheels.sh) into site-packages.
set -u
BENCH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$BENCH")
GROUPS_ALL="timing kernel emulation integrity tasks batch prediction"
EVALUATOR="tasks/reference timing/overhead timing/torch_spread timing/kernel_spread integrity/exploits
           integrity/diagnose tasks/tasks gputests"

load_group() {  # GROUP: define its step functions GROUP__NAME and GROUP_DEFAULT
    local file="$BENCH/$1/steps.sh"
    [ -f "$file" ] || { echo "no such group: $1 (groups: $GROUPS_ALL)" >&2; return 1; }
    # shellcheck source=/dev/null
    . "$file"
}

steps_of() {  # GROUP: every step name it defines, in definition order
    declare -F | awk -v p="$1__" '$3 ~ "^" p { sub("^" p, "", $3); print $3 }'
}

gputests() { python3 -m pytest -q -m gpu -p no:cacheprovider tests; }

if [ "${1:-}" = "--one" ]; then   # internal: run one step in this process (its own process group, under timeout)
    cd "$ROOT" || exit 1
    export PYTHONUNBUFFERED=1
    step=$2
    case $step in
        gputests) gputests; exit $? ;;
        */*) load_group "${step%%/*}" || exit 2
             fn="${step%%/*}__${step#*/}"
             declare -F "$fn" >/dev/null || { echo "no such step: $step"; exit 2; }
             "$fn"; exit $? ;;
    esac
    echo "no such step: $step"; exit 2
fi

if [ "${1:-}" = "list" ]; then
    for g in $GROUPS_ALL; do
        load_group "$g"
        default="${g}_DEFAULT"
        echo "$g (default: ${!default}):"
        for s in $(steps_of "$g"); do echo "  $g/$s"; done
    done
    echo "gputests"; echo "evaluator = $(echo $EVALUATOR)"
    exit 0
fi

[ $# -gt 0 ] || { sed -n '2,16p' "$0"; exit 2; }
cd "$ROOT" || exit 1
export OUT=${OUT:-out} PYTHONUNBUFFERED=1
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
# Wheels go in once per machine: a second run_gpu.sh started beside a first one finds them in place (a marker
# names what .whl/ held) instead of replacing files the first one's builds are reading.
install_wheels() {
    local marker
    marker="/tmp/site/.installed-$(ls -l .whl/ 2>/dev/null | md5sum | cut -c1-16)"
    [ -f "$marker" ] && return 0
    if ls .whl/*.whl >/dev/null 2>&1; then
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
            .whl/*.whl || return 1
    fi
    # .whl/cpXY-site*.tar.xz (bench/emulation/bring_wheels.sh): packages the worker imports (`python -I` ignores
    # PYTHONPATH), unpacked into the interpreter's own site-packages when it is that Python.
    local tag packed
    tag=cp$(python3 -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')
    for packed in .whl/"$tag"-cute-dsl-*.tar.xz; do     # another CuTe DSL version: .cute-dsl/<version>/
        [ -f "$packed" ] || continue
        local version=${packed#.whl/"$tag"-cute-dsl-}
        version=${version%.tar.xz}
        mkdir -p ".cute-dsl/$version" && tar -xJf "$packed" -C ".cute-dsl/$version" || return 1
    done
    for packed in .whl/*-site*.tar.xz; do
        [ -f "$packed" ] || continue
        if [[ "$packed" == ".whl/$tag-site"*.tar.xz ]]; then
            tar -xJf "$packed" -C "$(python3 -c 'import site; print(site.getsitepackages()[0])')" || return 1
        else
            echo "skipping $packed: this python3 is $tag" >&2
        fi
    done
    mkdir -p /tmp/site && touch "$marker"
}
if [ -d .whl ]; then
    mkdir -p /tmp/site
    ( flock 9; install_wheels ) 9>/tmp/run_gpu.install.lock
    ls .whl/*.whl >/dev/null 2>&1 && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi

# Expand groups and `evaluator` into steps.
todo=()
for arg in "$@"; do
    case $arg in
        evaluator) for s in $EVALUATOR; do todo+=("$s"); done ;;
        gputests|*/*) todo+=("$arg") ;;
        *) load_group "$arg" || exit 2
           default="${arg}_DEFAULT"
           for s in ${!default}; do todo+=("$arg/$s"); done ;;
    esac
done

{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader 2>&1 | head -1
  python3 -c "import torch; print('torch', torch.__version__)" 2>&1 | tail -1; } > "$OUT/summary.txt"
cat "$OUT/summary.txt"
for step in "${todo[@]}"; do
    log="$OUT/${step//\//_}.log"
    start=$SECONDS
    echo "=== $step"
    timeout "${STEP_TIMEOUT:-590}" bash "$BENCH/run_gpu.sh" --one "$step" >"$log" 2>&1
    rc=$?
    { echo "=== $step (rc=$rc, $((SECONDS - start)) s)"; cat "$log"; } >>"$OUT/all.log"
    tail -n "${TAIL:-25}" "$log"
    printf '%-26s rc=%-4s %4ss  %s\n' "$step" "$rc" "$((SECONDS - start))" \
        "$(tail -n 1 "$log" | cut -c1-100)" >>"$OUT/summary.txt"
done
echo; echo "==== summary"; cat "$OUT/summary.txt"
