#!/usr/bin/env bash
# The asynchronous emulation on planted tcgen05 bugs (run on an H100/H200 from the repository root:
# `bash bench/emulation/planted_check.sh`). Each bug of tests/blackwell/planted.py is planted in the shipped
# submission.py and run through `eval.py test --emulate-blackwell`; the run must fail and its output must carry
# the one line that names the cause, except for the bugs in WARN_ONLY, whose runs pass (as on a B200) and carry
# the warning line. The shipped kernel must pass every case with no emulation line.
# Prints one row per run: name | PASS/FAIL | cases passed | seconds | the cause line found (or what was missing).
# All runs go at once (builds are CPU-bound, emulated runs are never timed). ONLY=0,1 picks cases.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
OUT=${OUT:-out}; mkdir -p "$OUT/planted"
declare -A EXPECT=(
    [missing_wait_ld]="this tcgen05.dealloc frees tensor-memory columns that"
    [early_commit]="this copy writes shared memory that"
    [missing_commit]="this tcgen05.ld reads tensor-memory columns that"
    [sbo16]="has SBO = 16 bytes with no swizzle"
    [quarter0_scales]="different scale factors in lane quarters"
)
# a dealloc over an unfinished load is a warning: it breaks the result only when another CTA takes the columns first
WARN_ONLY=" missing_wait_ld "

run_one() {  # NAME SUBMISSION
    local name=$1 sub=$2 start=$SECONDS
    timeout "${LIMIT:-560}" python3 eval.py test --emulate-blackwell --timeout "${CASE_LIMIT:-400}" \
        ${ONLY:+--only "$ONLY"} --submission "$sub" --json "$OUT/planted/$name.json" >"$OUT/planted/$name.out" 2>&1
    echo "$? $((SECONDS - start))" >"$OUT/planted/$name.rc"
}

for bug in "${!EXPECT[@]}"; do
    python3 tests/blackwell/planted.py "$bug" "$OUT/planted/$bug.py" || { echo "$bug | FAIL | cannot plant"; continue; }
    run_one "$bug" "$OUT/planted/$bug.py" &
done
run_one shipped submission.py &
wait

passed() {  # JSON: "k/n"
    python3 -c "import json,sys; c=json.load(open(sys.argv[1]))['cases']; print(f\"{sum(x['passed'] for x in c)}/{len(c)}\")" \
        "$1" 2>/dev/null || echo "no json"
}
fails=0
for name in shipped "${!EXPECT[@]}"; do
    read -r rc secs <"$OUT/planted/$name.rc"
    counts=$(passed "$OUT/planted/$name.json")
    text=$(tr -s ' \n' ' ' <"$OUT/planted/$name.out")
    if [ "$name" = shipped ]; then
        lines=$(grep -c "emulated tcgen05" "$OUT/planted/$name.out")
        if [ "${counts%/*}" = "${counts#*/}" ] && [ "$lines" = 0 ]; then verdict=PASS; else verdict=FAIL; fi
        detail="rc $rc, $lines emulation lines"
    else
        want=${EXPECT[$name]}
        found=$(grep -o -m1 "emulated tcgen05.\{0,400\}${want}" <<<"$text" | head -1 | cut -c1-400)
        all_passed=no; [ "${counts%/*}" = "${counts#*/}" ] && all_passed=yes
        should_pass=no; [[ "$WARN_ONLY" == *" $name "* ]] && should_pass=yes
        if [ -n "$found" ] && [ "$all_passed" = "$should_pass" ]; then verdict=PASS; detail=$found
        else verdict=FAIL; detail="rc $rc; expected \"$want\"; first line: $(grep -m1 -E 'emulated|Error|error' "$OUT/planted/$name.out" | cut -c1-200)"; fi
    fi
    [ "$verdict" = PASS ] || fails=$((fails + 1))
    printf '%-16s | %-4s | %-7s | %4ss | %s\n' "$name" "$verdict" "$counts" "$secs" "$detail"
done
exit $((fails > 0))
