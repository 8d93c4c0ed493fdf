"""Putting it together: the anatomy and the hypotheses become one or two plain sentences with advice
(`diagnose`), for any task whose output is one tensor; the hypotheses for the nvfp4_gemm contract."""
from __future__ import annotations

import torch

from arena.diagnose.common import ATOL, EXACT, NEAR, RTOL, Diagnosis, fmt
from arena.diagnose.anatomy import Anatomy, anatomy
from arena.diagnose.readers import KEY_PREFIXES
from arena.diagnose.hypotheses import LAYOUT_BUGS, Match, gemm_hypotheses, is_gemm_contract, low_precision_check

# ---- putting it together ---------------------------------------------------------------------------

ADVICE = {
    "to_blocked_no_transpose": "to_blocked must transpose the 32-row and 4-row axes: blocks.reshape(-1, 4, 32, 4)"
                               ".transpose(1, 2).reshape(-1, 32, 16) (reference.py), so that byte (r%32)*16 + "
                               "((r%128)/32)*4 + k%4 of a 512-byte tile holds row r's scale.",
    **{f"rowblock_stride_{name}": "a 128-row block of blocked scales is ceil(K/64) tiles of 512 bytes: the "
                                  "stride from one to the next is ceil(K/64)*512 bytes, from the unpadded K."
       for name in ("zero", "scales", "double", "plus_one", "pad4", "pad8")},
    "transposed": "check the epilogue's row/column indexing (or which operand is M).",
    "nibble_swap": "element 0 of each byte is the LOW nibble: fix the unpacking of the operand that differs.",
    "scales_ignored": "the scale factors never reach the MMA/epilogue.",
    "sfa_ignored": "SFA never reaches the MMA/epilogue.",
    "sfb_ignored": "SFB never reaches the MMA/epilogue.",
    "scales_exchanged": "swap the scale pointers (sfa belongs to A's rows, sfb to B's).",
    "bf16_output": "round the fp32 accumulator straight to fp16.",
    "permuted_contiguous": "use the permuted tensor's data_ptr() as is; never call .contiguous() on it.",
    "plain_as_blocked": "pass sfa_permuted/sfb_permuted (blocked), not sfa/sfb, or index the plain layout.",
    "sbo": "a tcgen05.cp of a 32x128b scale atom reads from a no-swizzle descriptor with SBO = 128 bytes "
           "(8 rows x 16 bytes) and LBO = 0; its 8-row groups are 128 bytes apart.",
    "blocked_as_plain": "the permuted tensors hold the 128x4 blocked layout: byte "
                        "((r/128)*(K/64) + k/4)*512 + (r%32)*16 + ((r%128)/32)*4 + k%4.",
}
LAYOUT_ADVICE = ("the blocked byte for (row r, K-block k) is ((r/128)*(K/64) + k/4)*512 + (r%32)*16 + "
                 "((r%128)/32)*4 + k%4.")


def _advice(key: str) -> str:
    key = key.removesuffix("_partial")
    base = key[:-2] if key.endswith(("_a", "_b")) and key[:-2] in LAYOUT_BUGS else key
    if base in ADVICE:
        return ADVICE[base]
    if base.startswith("sbo_"):
        return ADVICE["sbo"]
    if base in LAYOUT_BUGS or base.startswith(KEY_PREFIXES):
        return LAYOUT_ADVICE
    if base.startswith("k_missing"):
        return "check the K loop bounds (and split-K reduction): that K range never reached the accumulator."
    if base.startswith("only_last"):
        return "accumulate across K tiles (don't overwrite or zero the accumulator per tile)."
    if base.startswith("only_first"):
        return "the K loop ends after its first tile: check its trip count."
    if base.startswith("batch_"):
        return "check the L (batch) offsets of the inputs and of c."
    return ""


@torch.no_grad()
def diagnose(data, output, expected, prefilled=None, rtol: float = RTOL, atol: float = ATOL,
             hypotheses: bool = True) -> Diagnosis | None:
    """Why `output` differs from `expected`, or None when it does not (or is not one comparable tensor)."""
    if not isinstance(output, torch.Tensor) or not isinstance(expected, torch.Tensor) \
            or tuple(output.shape) != tuple(expected.shape) or output.numel() == 0:
        return None
    an = anatomy(output, expected, prefilled, rtol, atol)
    if an.mismatches == 0:
        return None
    evidence = an.lines()
    frac = an.mismatches / an.elements
    if an.untouched_all:
        return Diagnosis("The output is exactly the pre-filled c: the kernel never wrote its result into the "
                         "tensor it returned (did it write to a copy, or return before the kernel ran?).",
                         evidence, "untouched")
    if an.all_zero:
        return Diagnosis("The output is all zeros: the result never reached the returned tensor, or the "
                         "accumulator was never loaded (zeros written by the epilogue).", evidence, "all_zero")
    if an.untouched and an.untouched >= 0.9 * an.mismatches:
        where = _where(an)
        return Diagnosis(f"{an.untouched} output elements ({where}) still hold the pre-filled c: those tiles were "
                         "never written; check the grid size and the handling of the last (partial) tiles.",
                         evidence, "unwritten_tiles")
    if hypotheses and is_gemm_contract(data, output):
        try:
            matches, notes = gemm_hypotheses(data, output, expected, rtol, atol)
        except (RuntimeError, ValueError, IndexError, TypeError) as error:
            matches, notes = [], [f"hypotheses not computed: {type(error).__name__}: {str(error).splitlines()[0]}"]
        found = _judge(matches, an)
        evidence += notes
        if found is not None:
            summary, key, shown = found
            evidence += ["best hypotheses: " + m.line() for m in shown]
            return Diagnosis(summary, evidence, key)
        evidence += ["best hypotheses (none fits): " + m.line() for m in matches[:3]]
        if an.nan == an.posinf == an.neginf == 0 and frac > 0.002:
            precision, lines = low_precision_check(data, output, expected, rtol, atol)
            evidence += lines
            if precision:
                article = "an" if precision == "fp16" else "a"
                return Diagnosis(f"The errors are small (max abs {fmt(an.max_abs)}) and spread over the whole output, "
                                 f"the size {article} {precision} accumulator gives: accumulate in fp32 and round to "
                                 "fp16 once.",
                                 evidence, f"low_precision_{precision}")
    if an.nan + an.posinf + an.neginf > an.expected_nonfinite:
        where = _where(an)
        return Diagnosis(f"The output holds {an.nan} NaN and {an.posinf + an.neginf} Inf values ({where}), which the "
                         "reference does not: usually a scale or operand read outside its buffer or from "
                         "uninitialised shared/tensor memory.", evidence, "nonfinite")
    where = _where(an)
    if not (hypotheses and is_gemm_contract(data, output)):
        evidence.append("(bug hypotheses and probes exist for the nvfp4_gemm contract only)")
        return Diagnosis(f"{an.mismatches} of {an.elements} elements are wrong ({where}; max abs error "
                         f"{fmt(an.max_abs)}).", evidence, None)
    return Diagnosis(f"{an.mismatches} of {an.elements} elements are wrong ({where}; max abs error "
                     f"{fmt(an.max_abs)}); no classic bug explains it.", evidence, None)


def _where(an: Anatomy) -> str:
    rows = None if an.row_pattern in (None, "every row") else an.row_pattern.removeprefix("only ")
    cols = None if an.col_pattern in (None, "every column") else an.col_pattern.removeprefix("only ")
    if rows and cols:
        return f"in {rows}; {cols}"
    if rows or cols:
        return f"in {rows or cols}"
    return "everywhere"


def _judge(matches: list[Match], an: Anatomy):
    """(summary, key, matches shown) for the best-fitting hypothesis, or None."""
    usable = [m for m in matches if m.wrong_known >= 8 and m.known >= 0.2]
    if not usable:
        return None
    exact = [m for m in usable if m.agree >= EXACT and m.explained >= 0.99]
    if exact:
        best = exact[0]
        same = [m.text for m in exact[1:] if m.agree >= best.agree - 1e-9 and m.note != "partial"][:3]
        also = f" (indistinguishable here from: {'; '.join(same)})" if same else ""
        oob = "" if best.known >= 0.999 else \
            f" on every element it predicts ({100 * best.known:.0f}%; the rest read scales from outside the buffer)"
        return (f"The output matches a kernel with {best.text}{oob}{also}. Fix: {_advice(best.key)}",
                best.key, exact[:3])
    partial = [m for m in usable if m.explained >= 0.98 and m.wrong_known >= 64]
    if partial:
        best = max(partial, key=lambda m: (m.explained, m.agree))
        return (f"The wrong elements ({_where(an)}) are exactly what a kernel with {best.text} produces, and the "
                f"rest is right: the bug hits only part of the output. Fix: {_advice(best.key)}", best.key, [best])
    near = [m for m in usable if m.agree >= NEAR and m.explained >= NEAR]
    if near:
        best = near[0]
        return (f"The output nearly matches ({100 * best.agree:.1f}% of elements) a kernel with {best.text}. "
                f"Fix: {_advice(best.key)}", best.key, near[:3])
    return None
