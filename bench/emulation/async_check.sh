#!/usr/bin/env bash
# GPU check of the emulation library's ISA rules, scale-quarter reading and lint (run on an H100/H200 from the
# repository root: `bash bench/emulation/async_check.sh`). Prints one row per check: name | PASS/FAIL | detail.
#   rules    the descriptor rules and error words, on the device's nvcc (CPU tests, no GPU needed)
#   kinds    unscaled MMA kinds and the 16x256b read, our one-MMA kernel (blackwell_emulation_kinds.py)
#   shipped  submission.py's sm_100a path (mxf4nvf4, scales read per lane quarter): every test case passes and
#            no "emulated tcgen05 warning" line appears
#   sbo16    .public-blackwell/s_128t2.py (scale copies with SBO = 16) under diagnose: the SBO lint warning and
#            the scale map's words; SKIP when the file is not there (public files are never committed)
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
OUT=${OUT:-out}; mkdir -p "$OUT"
row() { printf '%-8s | %-4s | %s\n' "$1" "$2" "$3"; }
fails=0

python3 -m pytest -q -p no:cacheprovider tests/test_tcgen05_isa_rules.py tests/test_diagnosis_words.py \
    -k "not through_the_worker" >"$OUT/async_rules.log" 2>&1
if [ $? -eq 0 ]; then row rules PASS "$(tail -1 "$OUT/async_rules.log")"; else row rules FAIL "$(tail -1 "$OUT/async_rules.log")"; fails=$((fails+1)); fi

python3 bench/emulation/blackwell_emulation_kinds.py >"$OUT/async_kinds.log" 2>&1
if [ $? -eq 0 ]; then row kinds PASS "$(grep -c match "$OUT/async_kinds.log") rows match"; else row kinds FAIL "$(grep -m1 -E 'MISMATCH|DIFFERS|Error' "$OUT/async_kinds.log" | cut -c1-150)"; fails=$((fails+1)); fi

timeout 560 python3 eval.py test --emulate-blackwell -q --submission submission.py --json "$OUT/async_shipped.json" \
    >"$OUT/async_shipped.log" 2>&1
passed=$(python3 -c "import json,sys; c=json.load(open(sys.argv[1]))['cases']; print(f\"{sum(x['passed'] for x in c)}/{len(c)}\")" \
         "$OUT/async_shipped.json" 2>/dev/null || echo "no json")
warned=$(grep -c "emulated tcgen05 warning" "$OUT/async_shipped.log" "$OUT/async_shipped.json" 2>/dev/null | awk -F: '{s+=$2} END {print s+0}')
if [ "${passed%/*}" = "${passed#*/}" ] && [ "$warned" = 0 ]; then row shipped PASS "$passed passed, 0 warnings"
else row shipped FAIL "$passed passed, $warned warning lines"; fails=$((fails+1)); fi

if [ -f .public-blackwell/s_128t2.py ]; then
    timeout 560 python3 eval.py diagnose --emulate-blackwell --submission .public-blackwell/s_128t2.py \
        >"$OUT/async_sbo16.log" 2>&1
    text=$(tr -s ' \n' ' ' <"$OUT/async_sbo16.log")
    lint=$(grep -c "has SBO = 16 bytes with no swizzle" <<<"$text")
    words=$(grep -c "received row i+j's scale" <<<"$text")
    if [ "$lint" -gt 0 ] && [ "$words" -gt 0 ]; then row sbo16 PASS "SBO lint and 'row 8·i+j ... row i+j's scale' both shown"
    else row sbo16 FAIL "lint lines $lint, scale-map words $words (see $OUT/async_sbo16.log)"; fails=$((fails+1)); fi
else
    row sbo16 SKIP "no .public-blackwell/s_128t2.py"
fi
exit $((fails > 0))
