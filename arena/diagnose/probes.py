"""Structured inputs through the real worker (`eval.py diagnose`): all-ones, nibble order, one-hot scale
maps that show which scale byte the kernel applied where, and a random case with its diagnosis."""
from __future__ import annotations

import torch

from arena.nvfp4.formats import BLOCK_SIZE, decode_e4m3
from arena.audit.reply_audit import differing_elements
from arena.nvfp4.layouts import COLS_PER_TILE, ROWS_PER_TILE, ceil_div, to_permuted
from arena.diagnose.common import fmt
from arena.diagnose.anatomy import anatomy
from arena.diagnose.hypotheses import LAYOUT_BUGS, is_gemm_contract, misread_scales
from arena.diagnose.groups import is_group_contract
from arena.diagnose.explain import explain_failure
from arena.diagnose.races import differing_tiles
from arena.diagnose.scalemap import explain_map
from arena.report.results import ProbeResult

# ---- probes: structured inputs through the real worker ------------------------------------------------

DEFAULT_PROBE_CASE = {"m": 256, "n": 256, "k": 512, "l": 1, "seed": 1111}
PROBE_SCALE = 16.0           # one K-block of ones contributes 16 x its scale


class ProbeFailure(RuntimeError):
    """The submission failed on a probe input (raised, crashed, hung); str() is one line."""


def _probe_table() -> torch.Tensor:
    """250 distinct e4m3 values (every finite nonzero code but ±1.0, both signs) as bytes."""
    codes = [c for c in range(256) if c & 0x7F not in (0, 0x7F, 0x38)]      # 0x38 = 1.0, the neutral scale
    return torch.tensor(codes, dtype=torch.uint8)


def gemm_probe_input(a_codes, b_codes, sfa_values, sfb_values, device, pad_a: float = 1.0, pad_b: float = 1.0,
                     seed: int = 0):
    """The competition's 7-tuple from codes [L, MN, K] (uint8 0..15) and scale values [L, MN, K/16]
    (float32 holding exact e4m3 values): official dtypes and strides, permuted scales through to_permuted
    with `pad_*` in the padding, and a random pre-filled c."""
    def fp4(codes):             # bytes moved as uint8, viewed as fp4 on the device (official strides)
        pairs = codes.to(torch.uint8).reshape(*codes.shape[:-1], -1, 2)
        raw = (pairs[..., 0] | (pairs[..., 1] << 4)).contiguous()
        return raw.to(device).permute(1, 2, 0).view(torch.float4_e2m1fn_x2)

    def scales(values, pad):
        raw = values.to(torch.float8_e4m3fn).contiguous().view(torch.uint8).to(device)
        plain = raw.view(torch.float8_e4m3fn).permute(1, 2, 0)
        mn, sk, l = plain.shape
        padding = torch.full((l, ceil_div(mn, ROWS_PER_TILE), ceil_div(sk, COLS_PER_TILE), 32, 4, 4), pad,
                             device=device).to(torch.float8_e4m3fn)
        return plain, to_permuted(plain, padding)

    l, m = a_codes.shape[0], a_codes.shape[1]
    n = b_codes.shape[1]
    sfa, sfa_perm = scales(sfa_values, pad_a)
    sfb, sfb_perm = scales(sfb_values, pad_b)
    generator = torch.Generator().manual_seed(seed)
    c = torch.randn((l, m, n), generator=generator).to(torch.float16).to(device).permute(1, 2, 0)
    return fp4(a_codes), fp4(b_codes), sfa, sfb, sfa_perm, sfb_perm, c


def _call_with_unit_scales(call, name: str, codes_a, codes_b, device):
    """(the probe input, the submission's output) for these e2m1 codes [L, rows, K] with every scale 1; the
    output is the failed ProbeResult instead when the submission failed."""
    l, m, k = codes_a.shape
    n = codes_b.shape[1]
    data = gemm_probe_input(codes_a, codes_b, torch.ones(l, m, k // BLOCK_SIZE), torch.ones(l, n, k // BLOCK_SIZE),
                            device)
    try:
        return data, call(data)
    except ProbeFailure as failure:
        return data, ProbeResult(name, False, f"the submission failed: {failure}")


def probe_ones(call, m, n, k, l, device) -> ProbeResult:
    """All fp4 values 1.0, all scales 1: every output must equal K."""
    name = f"all ones (every output must be K = {k})"
    data, out = _call_with_unit_scales(call, name, torch.full((l, m, k), 2, dtype=torch.uint8),
                                       torch.full((l, n, k), 2, dtype=torch.uint8), device)
    if isinstance(out, ProbeResult):
        return out
    expected = torch.full((m, n, l), float(k), dtype=torch.float16, device=out.device)
    an = anatomy(out, expected, data[6])
    if an.mismatches == 0:
        return ProbeResult(name, True, "every output is K")
    values = torch.unique(out.double().flatten().cpu(), return_counts=True)
    common = sorted(zip(values[1].tolist(), values[0].tolist()), reverse=True)[:4]
    seen = ", ".join(f"{fmt(v)} x{c}" for c, v in common)
    return ProbeResult(name, False, f"{an.mismatches} of {an.elements} outputs are not K (most common values: {seen})",
                       an.lines())


def probe_nibbles(call, m, n, k, l, device) -> ProbeResult:
    """A bytes 0x21 (0.5, 1.0), B bytes 0x02 (1.0, 0): K/4 when the low nibble is element 0 in both operands
    (or, invisibly, in neither); K/2 when exactly one operand takes the high nibble first."""
    name = f"nibble order (A = 0.5,1.0 per byte, B = 1.0,0: outputs must be K/4 = {k // 4})"
    _, out = _call_with_unit_scales(call, name, torch.tensor([1, 2], dtype=torch.uint8).repeat(l, m, k // 2),
                                    torch.tensor([2, 0], dtype=torch.uint8).repeat(l, n, k // 2), device)
    if isinstance(out, ProbeResult):
        return out
    o = out.double()
    if bool((o == k / 4).all()):
        return ProbeResult(name, True, "element 0 is the low nibble (or both operands agree, which a GEMM cannot see)")
    if bool((o == k / 2).all()):
        return ProbeResult(name, False, f"every output is K/2 = {k // 2}: exactly one operand takes the HIGH nibble "
                           "as element 0 (a GEMM cannot tell which)")
    frac = float((o == k / 4).float().mean())
    return ProbeResult(name, False, f"{100 * (1 - frac):.1f}% of outputs are not K/4 (see the all-ones probe first)")


def probe_scale_map(call, operand: str, m, n, k, l, device) -> ProbeResult:
    """Which stored scale byte the kernel applied at each (row, K-block) of SFA (or SFB).

    For SFA: A is all ones, B's row c holds ones only in K-block c % J, SFB is 1, so out[r, c] = 16 x (the
    SFA value applied at row r, K-block c). SFA holds coded values, twice: once coding the row inside its
    128-row tile, once coding (row tile, K-block); decoding both gives the stored position the kernel read.
    SFB is the mirror image. The padding of the probed permuted tensor is 0 (never a code).
    """
    j_blocks = k // BLOCK_SIZE
    own, other = (m, n) if operand == "A" else (n, m)
    seen_blocks = min(other, j_blocks)
    table = _probe_table()
    values = decode_e4m3(table, torch.float32)
    rb = torch.arange(own).unsqueeze(1) // ROWS_PER_TILE
    rows = (torch.arange(own) % ROWS_PER_TILE).unsqueeze(1).expand(own, j_blocks)
    tiles = rb * j_blocks + torch.arange(j_blocks).unsqueeze(0)
    wraps = int(tiles.max()) >= len(table)
    name = f"SF{operand} map (which stored scale each row and K-block of {'A' if operand == 'A' else 'B'} received)"
    applied_codes, applied_ones = [], []
    ones_codes = torch.full((l, other, k), 0, dtype=torch.uint8)
    one_hot = (torch.arange(k) // BLOCK_SIZE).unsqueeze(0) == (torch.arange(other) % j_blocks).unsqueeze(1)
    ones_codes[:, one_hot] = 2
    full_ones = torch.full((l, own, k), 2, dtype=torch.uint8)
    plain_sets = []
    for coding in (rows, tiles % len(table)):
        coded = values[coding].unsqueeze(0).expand(l, own, j_blocks)
        ones = torch.ones(l, other, j_blocks)
        if operand == "A":
            data = gemm_probe_input(full_ones, ones_codes, coded, ones, device, pad_a=0.0)
        else:
            data = gemm_probe_input(ones_codes, full_ones, ones, coded, device, pad_b=0.0)
        plain_sets.append(data)
        try:
            out = call(data)
        except ProbeFailure as failure:
            return ProbeResult(name, False, f"the submission failed: {failure}")
        o = out[:, :, 0].double().cpu()
        o = o[:, :seen_blocks] if operand == "A" else o[:seen_blocks, :].T       # [own, seen blocks]
        applied_codes.append(_decode_probe(o / PROBE_SCALE, values))
        applied_ones.append(bool((o == PROBE_SCALE).all()))
    one_hot_ok, one_hot_line = probe_one_hot(call, operand, m, n, k, l, device)
    row_code, tile_code = applied_codes
    known = (row_code >= 0) & (tile_code >= 0)
    got_row = torch.where(known, (tile_code // j_blocks) * ROWS_PER_TILE + row_code, torch.full_like(row_code, -1))
    got_block = torch.where(known, tile_code % j_blocks, torch.full_like(tile_code, -1))
    want_row = torch.arange(own).unsqueeze(1).expand(own, seen_blocks)
    want_block = torch.arange(seen_blocks).unsqueeze(0).expand(own, seen_blocks)
    right = (got_row == want_row) & (got_block == want_block)
    total = right.numel()
    lines = [f"probed {own} rows x {seen_blocks} of {j_blocks} K-blocks" + (" (coded positions wrap: ambiguous)"
                                                                              if wraps else "")]
    lines.append(one_hot_line)
    if bool(right.all()) and one_hot_ok:
        return ProbeResult(name, True, f"all {total} (row, K-block) positions received their own scale", lines)
    if bool(right.all()):
        return ProbeResult(name, False, f"all {total} (row, K-block) positions received their own scale, but the "
                           "one-hot probe disagrees (see below)", lines)
    ones_applied = all(applied_ones)
    lines += _map_table(want_row, want_block, got_row, got_block, right)
    matched = []
    for kind, (text, _) in LAYOUT_BUGS.items():
        for fill in (0.0,):
            ok = True
            for data, got in zip(plain_sets, applied_codes):
                plain, perm = (data[2], data[4]) if operand == "A" else (data[3], data[5])
                plain8, perm8 = plain.view(torch.uint8).cpu(), perm.view(torch.uint8).cpu()
                predicted = misread_scales(kind, plain8.view(torch.float8_e4m3fn), perm8.view(torch.float8_e4m3fn),
                                           0, torch.float64, fill)[:, :seen_blocks]
                predicted_code = _decode_probe(predicted, values)
                if not torch.equal(predicted_code, got):
                    ok = False
                    break
            if ok:
                matched.append((kind, text))
    headline = f"{int(right.sum())} of {total} (row, K-block) positions received their own scale"
    pattern = explain_map(got_row, got_block, operand, own, j_blocks, len(table) if wraps else None)
    if pattern:
        lines.append(f"pattern: {pattern[0]}" + (f"; likely cause: {pattern[1]}" if pattern[1] else ""))
    if ones_applied:
        headline += f"; every position received 1.0: SF{operand} is not applied (ignored, or SFA/SFB exchanged)"
    elif pattern and pattern[1]:
        headline += f"; {pattern[0]}: {pattern[1]}"
        if matched:
            lines.append("layout bugs with exactly this mapping: " + ", ".join(k for k, _ in matched))
    elif matched:
        headline += f"; the mapping is exactly that of {matched[0][1]}"
        lines.append("layout bugs with exactly this mapping: " + ", ".join(k for k, _ in matched))
    elif pattern:
        headline += f"; {pattern[0]}"
    if not ones_applied and int((~known).sum()):
        lines.append(f"{int((~known).sum())} positions received a value that is no stored scale (0 = padding or "
                     "zero-filled out-of-bounds read, or the value never reached the product)")
    return ProbeResult(name, False, headline, lines)


def probe_one_hot(call, operand: str, m, n, k, l, device) -> tuple[bool | None, str]:
    """One scale byte set to 2, every other scale and value 1: which output rows/columns did it reach?

    For SFA (row r0, K-block j0) the right answer is row r0, every column, each raised by 16.
    Returns (as expected, one line); None when the submission failed on it.
    """
    j_blocks = k // BLOCK_SIZE
    own = m if operand == "A" else n
    r0, j0 = min(33, own - 1), min(5, j_blocks - 1)
    hot = torch.ones(l, own, j_blocks)
    hot[:, r0, j0] = 2.0
    ones_a, ones_b = torch.full((l, m, k), 2, dtype=torch.uint8), torch.full((l, n, k), 2, dtype=torch.uint8)
    plain_a = hot if operand == "A" else torch.ones(l, m, j_blocks)
    plain_b = hot if operand == "B" else torch.ones(l, n, j_blocks)
    try:
        out = call(gemm_probe_input(ones_a, ones_b, plain_a, plain_b, device))
    except ProbeFailure as failure:
        return None, f"one-hot SF{operand} probe: the submission failed: {failure}"
    o = out[:, :, 0].double().cpu()
    changed = o != k
    if operand == "B":
        changed, o = changed.T, o.T
    rows = torch.nonzero(changed.any(1)).flatten().tolist()
    cols = torch.nonzero(changed.any(0)).flatten().tolist()
    other = "column" if operand == "A" else "row"
    mine = "row" if operand == "A" else "column"
    right = rows == [r0] and len(cols) == changed.shape[1] and bool((o[r0] == k + PROBE_SCALE).all())
    where = ", ".join(str(r) for r in rows[:8]) + (f" and {len(rows) - 8} more" if len(rows) > 8 else "")
    reach = "every" if len(cols) == changed.shape[1] else f"{len(cols)} of {changed.shape[1]}"
    text = (f"one-hot: SF{operand}[{mine} {r0}, K-block {j0}] = 2 (all else 1) changed output {mine}s "
            f"[{where or 'none'}] in {reach} {other}s; expected {mine} {r0} only, in every {other}, by +16")
    return right, text


def _decode_probe(scale_values: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """Index of each value in the probe table, -1 when it is not a table value."""
    v = scale_values.double()
    hit = v.unsqueeze(-1) == values.double().view(*([1] * v.dim()), -1)
    found = hit.any(-1)
    return torch.where(found, hit.float().argmax(-1), torch.full(v.shape, -1, dtype=torch.long))


def _map_table(want_row, want_block, got_row, got_block, right, limit: int = 10) -> list[str]:
    """A few (row, K-block) positions: the stored scale expected there beside the one the kernel applied."""
    wrong = torch.nonzero(~right)[: limit - 3].tolist()
    good = torch.nonzero(right)[:3].tolist()
    picks = sorted(set(map(tuple, wrong + good)))[:limit]
    lines = ["  row  K-block   expected scale of (row, K-block)   kernel applied scale of"]
    for r, j in picks:
        gr, gj = int(got_row[r, j]), int(got_block[r, j])
        got = f"({gr}, {gj})" if gr >= 0 else "(no stored scale)"
        want = f"({int(want_row[r, j])}, {int(want_block[r, j])})"
        mark = "ok" if right[r, j] else "WRONG"
        lines.append(f"  {r:>4} {j:>7}   {want:<33}{got:<24}{mark}")
    return lines


def probe_random(call, reference, args: dict, regenerate, name: str = "") -> ProbeResult:
    """The case itself, with the official random data (or a task's probe input): checked, and diagnosed when
    wrong."""
    from arena.taskdef.nested import clone_data
    name = name or "random case (" + "; ".join(f"{k}: {v}" for k, v in args.items()) + ")"
    data = regenerate()
    try:
        out = call(clone_data(data))
    except ProbeFailure as failure:
        return ProbeResult(name, False, f"the submission failed: {failure}")
    good, message = reference.check_implementation(data, out)
    if good:
        return ProbeResult(name, True, "matches the reference")
    found = explain_failure(reference, data, out, regenerate)
    headline = " ".join(str(message).split())[:200]
    if found is None:
        return ProbeResult(name, False, headline)
    return ProbeResult(name, False, headline, [f"diagnosis: {found.summary}"] + found.evidence)


REPEAT_CALLS = 3             # identical calls compared bit for bit: a race rarely shows in every call


def probe_repeat(call, regenerate) -> ProbeResult:
    """The same inputs (and the same pre-filled output) REPEAT_CALLS times: the results must agree bit for bit."""
    from arena.taskdef.nested import clone_data, tensors_in
    name = f"repeat ({REPEAT_CALLS} calls, identical inputs)"
    data = regenerate()
    outputs = []
    for _ in range(REPEAT_CALLS):
        try:
            outputs.append([t.detach().clone() for _, t in tensors_in(call(clone_data(data)), "output")])
        except ProbeFailure as failure:
            return ProbeResult(name, False, f"the submission failed: {failure}")
    for number, later in enumerate(outputs[1:], 2):
        for first, other in zip(outputs[0], later):
            if (first.shape, first.dtype) != (other.shape, other.dtype):
                return ProbeResult(name, False, f"call 1 and call {number} on identical inputs returned "
                                   f"{tuple(first.shape)} {first.dtype}, then {tuple(other.shape)} {other.dtype}")
            diff = differing_elements(first, other)
            if bool(diff.any()):
                return ProbeResult(name, False, f"call 1 and call {number} on identical inputs differ in "
                                   f"{int(diff.sum())} elements: a race (a missing barrier or fence, or partial "
                                   "sums reduced in a varying order)", ["differing tiles: " + "; ".join(differing_tiles(diff))])
    return ProbeResult(name, True, "every call gave the same bits")


GUARD_ROWS = 192             # rows after each group's c: more than a whole 128-row tile past any M
GUARD_BITS = 0x7E5A          # an fp16 NaN with a payload no arithmetic produces


def _guarded(c: torch.Tensor) -> torch.Tensor:
    """A copy of c [M, N, 1] with its official strides, as the first M rows of a buffer whose next
    GUARD_ROWS rows hold GUARD_BITS."""
    m, n, l = c.shape
    buffer = torch.full(((m + GUARD_ROWS) * n * l,), GUARD_BITS, dtype=torch.int16, device=c.device)
    view = buffer.view(c.dtype).as_strided(c.shape, c.stride())
    view.copy_(c)
    return view


def probe_group_bounds(call, regenerate) -> ProbeResult:
    """Each group's c is followed in memory by guard rows: a kernel that stores whole 128-row tiles past an
    irregular M (an unmasked epilogue) overwrites them. The competition's harness cannot see this (the
    writes land in whatever memory follows c); here they are caught."""
    name = f"rows past each group's M (each c followed by {GUARD_ROWS} guard rows)"
    data = regenerate()
    abc = [(a, b, _guarded(c)) for a, b, c in data[0]]
    guarded = (abc, *data[1:])
    try:
        outputs = call(guarded)
    except ProbeFailure as failure:
        return ProbeResult(name, False, f"the submission failed: {failure}")
    written, unseen = [], []
    for i, ((_, _, c), size) in enumerate(zip(abc, data[3])):
        out = outputs[i] if isinstance(outputs, (list, tuple)) and i < len(outputs) else None
        m, n, l = c.shape
        if not isinstance(out, torch.Tensor) or out.untyped_storage().nbytes() < (m + GUARD_ROWS) * n * l * 2:
            unseen.append(i)        # a new tensor, not the c it was given: its guard cannot be read
            continue
        memory = torch.empty(0, dtype=torch.int16, device=out.device).set_(out.untyped_storage())
        rows = torch.nonzero((memory[m * n * l:] != GUARD_BITS).reshape(GUARD_ROWS, n * l).any(dim=1)).flatten()
        if rows.numel():
            first, last = m + int(rows[0]), m + int(rows[-1])
            written.append(f"group {i} (M = {size[0]}): rows {first}-{last} written past the end of c "
                           f"({last - m + 1} rows; c ends at row {m - 1})")
    note = [f"group(s) {', '.join(map(str, unseen))} returned a new tensor instead of their c: not checked"] if unseen else []
    if written:
        return ProbeResult(name, False, f"{len(written)} of {len(abc)} groups write rows past their M: an unmasked "
                           "store of the last 128-row tile (mask rows at M); on the competition's GPU these writes "
                           "land in whatever memory follows c", written + note)
    if len(unseen) == len(abc):
        return ProbeResult(name, True, "not checked: no group returned the c it was given", note)
    return ProbeResult(name, True, "no row past any group's M was written", note)


def run_probes(call, reference, args: dict, device: str) -> list[ProbeResult]:
    """Every probe for one case shape; GEMM probes only for the nvfp4_gemm contract, the guard rows for
    group GEMM."""
    regenerate = lambda: reference.generate_input(**args)     # noqa: E731
    sample = regenerate()
    results = []
    if is_gemm_contract(sample) and all(key in args for key in ("m", "n", "k", "l")):
        m, n, k, l = args["m"], args["n"], args["k"], args["l"]
        results.append(probe_ones(call, m, n, k, l, device))
        results.append(probe_nibbles(call, m, n, k, l, device))
        results.append(probe_scale_map(call, "A", m, n, k, l, device))
        results.append(probe_scale_map(call, "B", m, n, k, l, device))
    results.append(probe_random(call, reference, args, regenerate))
    # a task's own structured inputs, then the shapes where hypotheses this case cannot tell apart differ
    contrast = getattr(reference, "contrast_probes", None)
    probes = {**getattr(reference, "PROBES", {}), **(contrast(dict(args)) if contrast else {})}
    for name, keys in probes.items():
        probe_args = {**args, **keys}
        results.append(probe_random(call, reference, probe_args, lambda a=probe_args: reference.generate_input(**a),
                                    name=name))
    if is_group_contract(sample):
        results.append(probe_group_bounds(call, regenerate))
    results.append(probe_repeat(call, regenerate))
    return results




def diagnose_case(evaluator, index: int, case):
    """`eval.py diagnose`: every probe for one case through the evaluator's worker.

    Returns (CaseResult, [probe dicts]); the CaseResult passes when every probe does, and carries the
    first failing probe's headline as its diagnosis and every probe line as evidence.
    """
    from arena.report.results import CaseResult
    from arena.worker.client import WorkerFailure

    calls = []

    def call(data):
        calls.append(1)
        evaluator.progress.stage(f"probes: call {len(calls)} of the submission")
        try:
            return evaluator.call_once(data)
        except WorkerFailure as failure:
            raise ProbeFailure(str(failure)) from None

    result = CaseResult(index=index, spec=case.spec, passed=False)
    try:
        probes = run_probes(call, evaluator.reference, dict(case.args), evaluator.device)
    except Exception as error:          # a probe the task's generator cannot make: one line, not a traceback
        result.error = f"the probes could not run: {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        return result, []
    result.passed = all(p.ok for p in probes)
    # a race explains every other probe's failure (each saw one random outcome): it is named first
    failing = sorted((p for p in probes if not p.ok), key=lambda p: not p.name.startswith("repeat"))
    if failing:
        result.error = f"{len(failing)} of {len(probes)} probes failed"
        explained = next((line.removeprefix("diagnosis: ") for line in failing[0].lines
                          if line.startswith("diagnosis: ")), failing[0].headline)
        result.diagnosis = f"{failing[0].name}: {explained}"
    for p in probes:
        result.evidence += [f"{'ok' if p.ok else 'FAILED'} {p.name}: {p.headline}"] + [f"  {x}" for x in p.lines]
    result.output = evaluator.take_probe_output()      # what the probed calls printed (an emulator's lint lines)
    return result, [dict(p.__dict__) for p in probes]
