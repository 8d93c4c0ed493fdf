"""Group GEMM (a list of G independent GEMMs): which groups are wrong, groups that hold another group's
result or multiply another group's operand, irregular-M tails, and each wrong group's own diagnosis (the
nvfp4_gemm anatomy and hypotheses on that group alone)."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from arena.taskdef.checking import mismatch_mask
from arena.nvfp4.emulation import scaled_gemm
from arena.diagnose.common import ATOL, EXACT, RTOL, Diagnosis
from arena.diagnose.anatomy import anatomy
from arena.diagnose.verdict import diagnose

ROWS_PER_TILE = 128
SAMPLE_COLUMNS = 256        # columns of each group compared under the cross-group hypotheses


def is_group_contract(data) -> bool:
    """(abc_tensors, sfasfb_tensors, sfasfb_reordered_tensors, problem_sizes), lists of one length G."""
    if not isinstance(data, (tuple, list)) or len(data) != 4 or \
            not all(isinstance(x, (tuple, list)) for x in data) or len({len(x) for x in data}) != 1:
        return False
    for (abc, sfs, reordered, sizes) in zip(*data):
        if len(abc) != 3 or len(sfs) != 2 or len(reordered) != 2 or len(sizes) != 4:
            return False
        if not all(isinstance(t, torch.Tensor) for t in (*abc, *sfs, *reordered)):
            return False
    return len(data[0]) > 0


def group_as_gemm(data, i: int) -> tuple:
    """Group i as the nvfp4_gemm 7-tuple (a, b, sfa, sfb, sfa_permuted, sfb_permuted, c), plain scales
    moved to the operands' device (the competition keeps them on the CPU)."""
    (a, b, c), (sfa, sfb), (pa, pb) = data[0][i], data[1][i], data[2][i]
    return a, b, sfa.to(a.device), sfb.to(a.device), pa, pb, c


@dataclass
class CrossMatch:
    """Group `group`'s output equals what the kernel computes with `what` taken from group `other`."""
    group: int
    other: int
    what: str          # "result", "A", "B", "scales"
    agree: float       # fraction of the compared window that matches the hypothesis


CROSS_TEXT = {"result": "holds group {j}'s result", "A": "multiplies group {j}'s A (and SFA)",
              "B": "multiplies group {j}'s B (and SFB)", "scales": "applies group {j}'s scale factors"}


def _cross_matches(data, outputs, expected, wrong_i, i: int, rtol: float, atol: float) -> list[CrossMatch]:
    """Hypotheses for wrong group i (its mismatch mask `wrong_i`) that take one input from another group j, on a
    column sample."""
    a, b, sfa, sfb, _, _, _ = group_as_gemm(data, i)
    out = outputs[i]
    found = []
    for j in range(len(outputs)):
        if j == i:
            continue
        aj, bj, sfaj, sfbj, _, _, _ = group_as_gemm(data, j)
        rows = min(out.shape[0], expected[j].shape[0])
        cols = min(out.shape[1], expected[j].shape[1], SAMPLE_COLUMNS)
        same_k = aj.shape[1] == a.shape[1]
        candidates = {"result": (aj, sfaj, bj, sfbj)}
        if same_k:
            candidates.update({"A": (aj, sfaj, b, sfb), "B": (a, sfa, bj, sfbj), "scales": (a, sfaj, b, sfbj)})
        if int(wrong_i[:rows, :cols, 0].sum()) < 8:
            continue
        window = out[:rows, :cols, 0]
        for what, (ca, csa, cb, csb) in candidates.items():
            if what == "result":
                predicted = expected[j][:rows, :cols, 0]
            else:
                predicted = scaled_gemm(ca[:rows, :, 0], cb[:cols, :, 0], csa[:rows, :, 0],
                                        csb[:cols, :, 0]).to(out.dtype)
            agree = 1.0 - float(mismatch_mask(window, predicted.to(window.device), rtol, atol).double().mean())
            if agree >= EXACT:
                found.append(CrossMatch(i, j, what, agree))
    return sorted(found, key=lambda m: (-m.agree, ["result", "A", "B", "scales"].index(m.what), m.other))


def _tail_rows(m: int) -> tuple[int, int] | None:
    """The rows of an irregular-M group past its last full 128-row tile, or None when M is a multiple."""
    start = m // ROWS_PER_TILE * ROWS_PER_TILE
    return (start, m) if start < m else None


def _only_tail_wrong(wrong) -> bool:
    """Whether the wrong rows of a group's mismatch mask are exactly its irregular-M tail."""
    tail = _tail_rows(wrong.shape[0])
    if tail is None:
        return False
    wrong_rows = wrong.flatten(1).any(dim=1)
    return bool(wrong_rows[tail[0]:].all()) and not bool(wrong_rows[:tail[0]].any())


def group_label(data, i: int) -> str:
    m, n, k, _ = data[3][i]
    return f"group {i} ({m}x{n}x{k})"


@torch.no_grad()
def diagnose_groups(data, outputs, expected, prefilled=None, rtol: float = RTOL, atol: float = ATOL) -> Diagnosis | None:
    """Why a group GEMM's outputs differ from the reference's, or None when every group matches."""
    if not is_group_contract(data) or not isinstance(outputs, (list, tuple)) or len(outputs) != len(expected):
        return None
    if any(not isinstance(o, torch.Tensor) or o.shape != e.shape for o, e in zip(outputs, expected)):
        return None
    groups = len(outputs)
    prefilled = prefilled if prefilled is not None and len(prefilled) == groups else [None] * groups
    masks = [mismatch_mask(out, want.to(out.device), rtol, atol) for out, want in zip(outputs, expected)]
    wrong = [(i, int(mask.sum())) for i, mask in enumerate(masks) if bool(mask.any())]
    if not wrong:
        return None
    evidence = [f"wrong groups: {len(wrong)} of {groups} (" +
                ", ".join(f"{group_label(data, i)}: {n} of {outputs[i].numel()} elements" for i, n in wrong) + ")"]
    wrong_ids = [i for i, _ in wrong]

    cross = {}
    for i in wrong_ids:
        matches = _cross_matches(data, outputs, expected, masks[i], i, rtol, atol)
        if matches:
            cross[i] = matches[0]
    if cross and len(cross) == len(wrong_ids):
        evidence += [f"group {m.group} {CROSS_TEXT[m.what].format(j=m.other)} "
                     f"({100 * m.agree:.2f}% of rows x first {SAMPLE_COLUMNS} columns agree)" for m in cross.values()]
        kinds = {m.what for m in cross.values()}
        pairs = "; ".join(f"group {m.group} {CROSS_TEXT[m.what].format(j=m.other)}" for m in cross.values())
        if kinds == {"result"}:
            summary = (f"Groups exchanged: {pairs}. The kernel maps its tiles (or its output pointers) to the "
                       "wrong groups: check the per-group index into the pointer, problem-size and tile-offset arrays.")
            key = "groups_exchanged"
        else:
            summary = (f"Operands from the wrong group: {pairs}. One per-group pointer array is indexed with "
                       "another group's index (off by one, or a stale index after the tile scheduler moved on).")
            key = "group_operand_" + "_".join(sorted(kinds))
        return Diagnosis(summary, evidence, key)

    tails = [i for i in wrong_ids if _only_tail_wrong(masks[i])]
    if tails and len(tails) == len(wrong_ids):
        spans = "; ".join(f"{group_label(data, i)}: rows {_tail_rows(outputs[i].shape[0])[0]}-{outputs[i].shape[0] - 1}"
                          + (", the whole group as M < 128" if outputs[i].shape[0] < ROWS_PER_TILE else "") for i in tails)
        anatomies = {i: anatomy(outputs[i], expected[i], prefilled[i], rtol, atol) for i in tails}
        untouched = all(prefilled[i] is not None and anatomies[i].untouched >= anatomies[i].mismatches for i in tails)
        how = "still hold the pre-filled c" if untouched else "are wrong"
        summary = (f"Only the irregular-M tails are wrong: the rows past each group's last full 128-row tile {how} "
                   f"({spans}). Count row tiles as ceil(M/128) and mask the last tile's rows at M, not at 128.")
        per_group = [f"{group_label(data, i)}: " + line for i in tails
                     for line in anatomies[i].lines()[:2]]
        return Diagnosis(summary, evidence + per_group, "group_tails_unwritten" if untouched else "group_tails_wrong")

    per_group = []
    for i in wrong_ids:
        found = diagnose(group_as_gemm(data, i), outputs[i], expected[i], prefilled[i], rtol, atol)
        if found is not None:
            per_group.append((i, found))
    for i, found in per_group:
        evidence += [f"{group_label(data, i)}: {found.summary}"] + [f"  {line}" for line in found.evidence]
    keys = {found.hypothesis for _, found in per_group}
    right = [i for i in range(groups) if i not in wrong_ids]
    right_text = "" if not right else f"; group {right[0]} is right" if len(right) == 1 else \
        f"; groups {', '.join(map(str, right))} are right"
    if len(per_group) == 1 or (len(keys) == 1 and None not in keys):
        i, found = per_group[0]
        which = group_label(data, i) if len(per_group) == 1 else f"every wrong group ({', '.join(map(str, wrong_ids))})"
        return Diagnosis(f"{which}{right_text}: {found.summary}", evidence, found.hypothesis)
    return Diagnosis(f"{len(wrong_ids)} of {groups} groups are wrong ({', '.join(map(str, wrong_ids))}){right_text}; "
                     f"each group's own diagnosis follows.", evidence, None)
