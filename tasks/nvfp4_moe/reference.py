"""nvfp4_moe reference: one NVFP4 mixture-of-experts layer (DeepSeek-V3-like, scaled down), in stages:

1. activation quantization: x (bf16) -> NVFP4 with the global scale a1_gs: per 16 elements the e4m3 scale
   amax/6/a1_gs, elements rounded to e2m1 (nearest, ties to even);
2. L1 grouped GEMM: for every (token, expert) pair of the routing, h = xq · w1[e]ᵀ × (a1_gs × w1_gs[e]) [2I];
3. SiLU(gate) · up: act = silu(h[:I]) × h[I:] (fp32);
4. requantization of act to NVFP4 with the global scale a2_gs (as in 1);
5. L2 grouped GEMM: y = actq · w2[e]ᵀ × (a2_gs × w2_gs[e]) [H];
6. weighted combine: out[t] = Σ_j topk_weights[t, j] × y(t, topk_ids[t, j]), rounded once to bf16.
Every dequantized product is exact in fp32; the sums run in fp32 (TF32 off). tests/test_nvfp4_moe.py checks
this against an fp64 numpy model that shares no code with it.

`generate_input(t, h, i, e, k, seed, data="random")`: x Gaussian with per-token spread; weights Gaussian,
quantized per expert (w_gs = amax / (6 × 448)); routing: softmax of random logits, top-k, renormalised (as
DeepSeek-V3); a1_gs from x's amax, a2_gs calibrated on the reference's own intermediate (a static scale).
`data` selects the structured probes: "uniform" (every e2m1 value 1.5, every block scale 1, global scales
1: each L1 output is exactly 1.5² × H, whatever the scale layout), "identity_routing" (token t -> experts
t, t+1, ... mod E, equal weights), "single_expert" (every token's weight on expert 0).
"""
import math

import torch

import moe_envelope
from task import input_t, output_t
from arena.taskdef.checking import EnvelopeCheck
from arena.nvfp4.formats import BLOCK_SIZE, E2M1_MAX, E4M3_MAX, dequantize, pack_codes, quantize_nvfp4
from arena.nvfp4.layouts import to_blocked
from arena.taskdef.tolerance import tolerance_beside

DISTRIBUTIONS = ("random", "uniform", "identity_routing", "single_expert", "ties", "repeated_ids")
_TIES = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0)     # e2m1 midpoints, then values


def _device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def quantize(x: torch.Tensor, global_scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Stage 1 / 4: fp32 [R, C] -> (NVFP4 packed [R, C/2], e4m3 scales [R, C/16]) under `global_scale`."""
    return quantize_nvfp4(x.float(), global_scale)


def _blocked_per_expert(sf: torch.Tensor) -> torch.Tensor:
    return torch.stack([to_blocked(sf[e].view(torch.uint8)).view(torch.float8_e4m3fn) for e in range(sf.shape[0])])


def _quantized_weights(w: torch.Tensor):
    """[E, R, C] fp32 -> (packed, scales, blocked scales, global scales [E])."""
    gs = (w.abs().amax(dim=(1, 2)) / (E2M1_MAX * E4M3_MAX)).clamp(min=1e-12)
    packed, scales = zip(*(quantize_nvfp4(w[e], float(gs[e])) for e in range(w.shape[0])))
    packed = torch.stack([p.view(torch.uint8) for p in packed]).view(torch.float4_e2m1fn_x2)
    scales = torch.stack([s.view(torch.uint8) for s in scales]).view(torch.float8_e4m3fn)
    return packed, scales, _blocked_per_expert(scales), gs.float()


def _uniform_weights(e: int, rows: int, cols: int, device):
    packed = pack_codes(torch.full((e, rows, cols), 3, dtype=torch.uint8, device=device))       # e2m1 1.5
    scales = torch.ones(e, rows, cols // BLOCK_SIZE, device=device).to(torch.float8_e4m3fn)
    return packed, scales, _blocked_per_expert(scales), torch.ones(e, device=device)


def stages(data, upto: int = 6, bugs: frozenset = frozenset()):
    """The pipeline of the module docstring in fp32; `upto=1` stops after the activation quantization; `bugs`
    plant the classic mistakes for the diagnosis (keys of BUGS). Returns {"x_dequantized", "out"}."""
    (x, ids, weights, w1, w1_sf, w1_sf_blocked, w1_gs, w2, w2_sf, w2_sf_blocked, w2_gs, a1_gs, a2_gs, out) = data
    t, h = x.shape
    e, two_i, _ = w1.shape
    inter = two_i // 2
    g1, g2 = float(a1_gs[0]), float(a2_gs[0])
    if "scales_blocked_as_plain" in bugs:      # the blocked bytes read as if they were row-major plain scales
        w1_sf = w1_sf_blocked.reshape(e, -1)[:, :w1_sf[0].numel()].reshape(w1_sf.shape)
        w2_sf = w2_sf_blocked.reshape(e, -1)[:, :w2_sf[0].numel()].reshape(w2_sf.shape)
    remap = next((key for key in bugs if key in REMAPS), None)
    if remap:
        w1_sf, w2_sf = remapped_scales(w1_sf_blocked, w1_sf.shape, remap), remapped_scales(w2_sf_blocked, w2_sf.shape,
                                                                                          remap)
    if "activation_not_quantized" in bugs:
        xq_real = x.float()
    else:
        xq, xsf = quantize(x, g1)
        xq_real = dequantize(xq, xsf) * g1
    result = {"x_dequantized": xq_real}
    if upto == 1:
        return result
    total = torch.zeros(t, h, dtype=torch.float32, device=x.device)
    for expert in range(e):
        token, slot = torch.nonzero(ids == expert, as_tuple=True)
        if token.numel() == 0:
            continue
        w1_real = dequantize(w1[expert], w1_sf[expert]) * (1.0 if "alpha_without_weight_scale" in bugs
                                                            else float(w1_gs[expert]))
        hidden = torch.matmul(xq_real[token], w1_real.T)
        gate, up = hidden[:, :inter], hidden[:, inter:]
        if "gate_up_swapped" in bugs:
            gate, up = up, gate
        act = gate * torch.sigmoid(gate) * up
        if "requant_skipped" in bugs:
            act_real = act
        else:
            aq, asf = quantize(act, g2)
            act_real = dequantize(aq, asf) * g2
        w2_real = dequantize(w2[expert], w2_sf[expert]) * float(w2_gs[expert])
        y = torch.matmul(act_real, w2_real.T)
        weight = torch.ones_like(weights[token, slot]) if "combine_unweighted" in bugs else weights[token, slot]
        total.index_add_(0, token, y * weight.unsqueeze(1))
    result["out"] = total
    return result


# Scale-factor remaps: the blocked byte a kernel reads for scale (row r, K block j) under a wrong index map.
# Each maps (r, j, column tiles) to (r', j', column tiles', inner offset kind).
REMAPS = {
    "sf_row_next": "scale row r + 1 read for weight row r",
    "sf_row_previous": "scale row r - 1 read for weight row r",
    "sf_k_next": "the scale of K block j + 1 read for K block j",
    "sf_k_previous": "the scale of K block j - 1 read for K block j",
    "sf_k_as_index": "the row-tile stride computed from K instead of K/16 (the element count used as the scale "
                     "count)",
    "sf_32x4_transposed": "each 128x4 scale tile read row-major (row r at byte 4·(r % 128)), the 32x4 "
                          "interleave ignored",
}


def remapped_scales(blocked: torch.Tensor, shape, kind: str) -> torch.Tensor:
    """The plain scales [E, rows, cols] a kernel applies when it indexes the blocked copy with remap `kind`."""
    _, rows, cols = shape
    r = torch.arange(rows, device=blocked.device).view(rows, 1)
    j = torch.arange(cols, device=blocked.device).view(1, cols)
    r = {"sf_row_next": (r + 1).clamp(max=rows - 1), "sf_row_previous": (r - 1).clamp(min=0)}.get(kind, r)
    j = {"sf_k_next": (j + 1).clamp(max=cols - 1), "sf_k_previous": (j - 1).clamp(min=0)}.get(kind, j)
    tiles = (cols * BLOCK_SIZE + 3) // 4 if kind == "sf_k_as_index" else (cols + 3) // 4
    inner = (r % 128) * 4 + j % 4 if kind == "sf_32x4_transposed" else (r % 32) * 16 + (r % 128) // 32 * 4 + j % 4
    flat = blocked.reshape(blocked.shape[0], -1).view(torch.uint8)
    offset = (((r // 128) * tiles + j // 4) * 512 + inner) % flat.shape[1]     # a wrapped read: unknown memory
    return flat[:, offset.flatten()].reshape(blocked.shape[0], rows, cols).view(torch.float8_e4m3fn)


def ref_kernel(data: input_t) -> output_t:
    out = data[-1]
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        out.copy_(stages(data)["out"].to(out.dtype))
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    return out


def _routing(t: int, e: int, k: int, gen, device, data: str):
    if data == "identity_routing":
        ids = (torch.arange(t, device=device).view(t, 1) + torch.arange(k, device=device).view(1, k)) % e
        return ids.to(torch.int32), torch.full((t, k), 1.0 / k, device=device)
    if data == "single_expert":
        ids = torch.arange(k, device=device).view(1, k).expand(t, k).contiguous()
        weights = torch.zeros(t, k, device=device)
        weights[:, 0] = 1.0
        return ids.to(torch.int32), weights
    logits = torch.randn(t, e, generator=gen, device=device)
    top, ids = torch.softmax(logits, dim=-1).topk(k, dim=-1)
    if data == "repeated_ids" and k > 1:        # every other token's last slot repeats its first expert
        ids[::2, -1] = ids[::2, 0]
    return ids.to(torch.int32), top / top.sum(dim=-1, keepdim=True)


def _ties_activations(t: int, h: int, gen, device) -> torch.Tensor:
    """x whose blocks have amax 6 × 2^k (so with a1_gs = 1 every block scale is a power of two) and whose
    other elements sit on e2m1 midpoints or values times 2^k: exact ties, which round to even."""
    table = torch.tensor(_TIES, device=device)
    x = table[torch.randint(0, len(_TIES), (t, h), generator=gen, device=device)]
    x = x * torch.where(torch.rand(t, h, generator=gen, device=device) < 0.5, -1.0, 1.0)
    x[:, ::BLOCK_SIZE] = 6.0
    power = torch.randint(-3, 2, (t, h // BLOCK_SIZE, 1), generator=gen, device=device).float()
    return (x.unflatten(-1, (-1, BLOCK_SIZE)) * torch.exp2(power)).flatten(-2)


def generate_input(t: int, h: int, i: int, e: int, k: int, seed: int, data: str = "random"):
    if data not in DISTRIBUTIONS:
        raise ValueError(f"unknown data distribution {data!r}: use one of {', '.join(DISTRIBUTIONS)}")
    if k > e:
        raise ValueError(f"top-k {k} needs at least {k} experts, got {e}")
    device = _device()
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    x = torch.randn(t, h, generator=gen, device=device) * (0.25 + torch.rand(t, 1, generator=gen, device=device))
    ids, weights = _routing(t, e, k, gen, device, data)
    if data == "ties":
        x = _ties_activations(t, h, gen, device)
    if data == "uniform":
        x = torch.full((t, h), 1.5, device=device)
        w1 = _uniform_weights(e, 2 * i, h, device)
        w2 = _uniform_weights(e, h, i, device)
        a1_gs = torch.ones(1, device=device)
    else:
        w1 = _quantized_weights(torch.randn(e, 2 * i, h, generator=gen, device=device) / math.sqrt(h))
        w2 = _quantized_weights(torch.randn(e, h, i, generator=gen, device=device) / math.sqrt(i))
        a1_gs = torch.ones(1, device=device) if data == "ties" else \
            (x.abs().max() / (E2M1_MAX * E4M3_MAX)).reshape(1).float()
    x = x.to(torch.bfloat16)
    out = torch.randn(t, h, generator=gen, device=device).to(torch.bfloat16)
    partial = (x, ids, weights, *w1, *w2, a1_gs, torch.ones(1, device=device), out)
    a2_gs = _calibrate_intermediate(partial) if data != "uniform" else _uniform_intermediate_scale(h)
    return (x, ids, weights, *w1, *w2, a1_gs, a2_gs.to(device), out)


def _calibrate_intermediate(data) -> torch.Tensor:
    """a2_gs from the amax of the intermediate (act) over every routed pair: static calibration."""
    x, ids = data[0], data[1]
    w1, w1_sf, w1_gs, a1_gs = data[3], data[4], data[6], data[11]
    xq, xsf = quantize(x, float(a1_gs[0]))
    xr = dequantize(xq, xsf) * float(a1_gs[0])
    inter, amax = w1.shape[1] // 2, torch.zeros((), device=x.device)
    for expert in range(w1.shape[0]):
        token = torch.nonzero((ids == expert).any(dim=1)).flatten()
        if token.numel():
            hidden = torch.matmul(xr[token], (dequantize(w1[expert], w1_sf[expert]) * float(w1_gs[expert])).T)
            act = torch.nn.functional.silu(hidden[:, :inter]) * hidden[:, inter:]
            amax = torch.maximum(amax, act.abs().max())
    return (amax.clamp(min=1e-30) / (E2M1_MAX * E4M3_MAX)).reshape(1).float()


def _uniform_intermediate_scale(h: int) -> torch.Tensor:
    """Uniform probe: act = silu(2.25 H) × 2.25 H exactly representable as e2m1 6 × scale 256 × a2_gs."""
    hidden = torch.tensor(2.25 * h, dtype=torch.float32)
    act = torch.nn.functional.silu(hidden) * hidden
    return (act / (E2M1_MAX * 256.0)).reshape(1)


# the precision envelope (moe_envelope.py); task.yml's `tolerance` is what the diagnosis matches hypotheses with
check_implementation = EnvelopeCheck(ref_kernel, **tolerance_beside(__file__), outside=moe_envelope.outside)

PROBES = {
    "uniform (every e2m1 1.5, every scale 1: the GEMMs without any scale layout)": {"data": "uniform"},
    "identity routing (token t -> experts t, t+1, ... with equal weights)": {"data": "identity_routing"},
    "single expert (every token's weight on expert 0: no routing, no combine)": {"data": "single_expert"},
}


def contrast_probes(case: dict) -> dict[str, dict]:
    """`eval.py diagnose`'s probes where this case's shape or data hides a classic bug: with a weight's scale rows
    in one 128-row tile (2I or H at most 128) a wrong row-tile stride reads the right bytes, and on uniform data
    every scale is 1 (no remap and no requantization shows). Name -> the case keys that change."""
    probes = {}
    if 2 * case.get("i", 128) <= 128 or case.get("h", 256) <= 128:
        probes["two 128-row scale tiles in each weight (H = 192, I = 128: shows a wrong row-tile stride)"] = \
            {"h": max(case.get("h", 192), 192), "i": max(case.get("i", 128), 128)}
    if case.get("data") == "uniform":
        probes["random data (shows the scale layouts and the requantization, which uniform data hides)"] = \
            {"data": "random"}
    return probes


# ---- a second, independent reference: each token alone, every weight dense, fp64 ---------------------------

def dense_reference(data) -> torch.Tensor:
    """out [T, H] in float64, token by token, from fully dequantized dense weights: no grouping, no index_add,
    the quantization done per token row. `diagnose_failure` checks ref_kernel against it (the self-check)."""
    (x, ids, weights, w1, w1_sf, _, w1_gs, w2, w2_sf, _, w2_gs, a1_gs, a2_gs, _) = data
    dev = torch.device("cpu")
    w1d = [(dequantize(w1[e], w1_sf[e]).to(dev, torch.float64) * float(w1_gs[e])) for e in range(w1.shape[0])]
    w2d = [(dequantize(w2[e], w2_sf[e]).to(dev, torch.float64) * float(w2_gs[e])) for e in range(w2.shape[0])]
    g1, g2 = float(a1_gs[0]), float(a2_gs[0])
    inter = w1.shape[1] // 2
    rows = []
    for t in range(x.shape[0]):
        q, s = quantize(x[t:t + 1].float(), g1)
        xt = dequantize(q, s).to(dev, torch.float64)[0] * g1
        acc = torch.zeros(x.shape[1], dtype=torch.float64)
        for j in range(ids.shape[1]):
            e = int(ids[t, j])
            hid = w1d[e] @ xt
            act = torch.nn.functional.silu(hid[:inter]) * hid[inter:]
            aq, asf = quantize(act.float().unsqueeze(0), g2)
            acc += float(weights[t, j]) * (w2d[e] @ (dequantize(aq, asf).to(dev, torch.float64)[0] * g2))
        rows.append(acc)
    return torch.stack(rows)


# ---- why an output is wrong: the stage and the classic bug -------------------------------------------------

BUGS = {   # key: (stage, what it means)
    "activation_not_quantized": ("1 activation quantization", "x used in bf16 without the NVFP4 quantization"),
    "scales_blocked_as_plain": ("2 L1 GEMM", "the weights' blocked (128x4) scales read as plain row-major "
                                "scales: a wrong scale-factor remap"),
    "alpha_without_weight_scale": ("2 L1 GEMM", "alpha without the weight global scale (a1_gs alone, not "
                                   "a1_gs × w1_gs)"),
    "gate_up_swapped": ("3 SiLU(gate)·up", "gate and up exchanged (SiLU applied to the up half)"),
    "requant_skipped": ("4 requantization", "the intermediate kept in high precision, never requantized to "
                        "NVFP4"),
    "combine_unweighted": ("6 weighted combine", "the experts' outputs summed without the top-k weights"),
}


EXPLAINS = 0.99       # a hypothesis is named only when it reproduces this share of the wrong elements and of all
SUPPORTS = 0.5        # and when it differs from the reference on at least this share of the wrong elements


def _close(output, candidate, rtol, atol) -> torch.Tensor:
    got, want = output.float(), candidate.to(output.dtype).float().to(output.device)
    return (got - want).abs() <= atol + rtol * want.abs()


def _share_close(output, candidate, rtol, atol) -> float:
    return float(_close(output, candidate, rtol, atol).float().mean())


def _hypotheses():
    """(key, stage, meaning) of every classic bug, the scale-factor remaps among them."""
    yield from ((key, stage, meaning) for key, (stage, meaning) in BUGS.items())
    yield from ((key, "2 L1 GEMM and 5 L2 GEMM", f"a scale-factor remap of the weights' blocked scales: {pattern}")
                for key, pattern in REMAPS.items())


def _where_wrong(data, wrong: torch.Tensor) -> str:
    """What is known without a hypothesis: the wrong tokens, and the experts they share."""
    ids = data[1].cpu()
    rows = torch.nonzero(wrong.any(dim=1).cpu()).flatten()
    tokens = ", ".join(str(int(t)) for t in rows[:8]) + (f" and {rows.numel() - 8} more" if rows.numel() > 8 else "")
    text = f"{int(wrong.sum())} wrong elements in {rows.numel()} of {wrong.shape[0]} tokens ({tokens})"
    repeated = torch.tensor([len(set(r.tolist())) < len(r) for r in ids], dtype=torch.bool)
    if rows.numel() and bool(repeated.any()) and torch.equal(wrong.any(dim=1).cpu(), repeated):
        return (text + "; the wrong tokens are exactly those whose top-k names one expert twice: a duplicate id "
                "counted once (routing weights built by assignment, or a per-expert token mask set instead of "
                "summed)")
    common = set(ids[rows[0]].tolist()) if rows.numel() else set()
    for t in rows[1:]:
        common &= set(ids[t].tolist())
    if common and rows.numel() < wrong.shape[0]:
        e = min(common)
        text += f"; every wrong token is routed to expert {e}"
        if e > 0 and not bool((ids == e - 1).any()):
            text += (f", and expert {e - 1} received none: an empty expert's stale tile written into the next "
                     "expert's rows?")
    return text


def diagnose_failure(data, output, expected, rtol: float, atol: float):
    """(summary, evidence, key) naming the stage of a wrong output when a classic bug reproduces its wrong
    elements and its right ones; otherwise what is known (the wrong tokens and their experts), or None."""
    if not isinstance(output, torch.Tensor) or output.shape != expected.shape:
        return None
    evidence = []
    dense = dense_reference(data)
    self_check = _share_close(expected.cpu(), dense, rtol, atol)
    evidence.append(f"reference self-check: ref_kernel and the independent dense per-token reference agree on "
                    f"{self_check:.2%} of elements")
    if self_check < 0.999:
        return ("The reference itself is inconsistent: two independent references disagree; no verdict on the "
                "submission (report this task).", evidence, "reference_inconsistent")
    wrong = moe_envelope.outside(data, output).to(output.device)
    if not bool(wrong.any()):
        return None
    found, silent = [], []
    for key, stage, meaning in _hypotheses():
        candidate = stages(data, bugs=frozenset({key}))["out"]
        # A bug that changes nothing on this case's elements the output got wrong cannot be told apart from
        # the reference here ("never requantized" on uniform data): never named (no accusation the case
        # cannot support).
        differs = candidate.to(expected.dtype).to(expected.device) != expected
        if float(differs[wrong].float().mean()) < SUPPORTS:
            silent.append(key)
            continue
        close = _close(output, candidate, rtol, atol)
        found.append((float(close[wrong].float().mean()), float(close.float().mean()), stage, key, meaning))
    found.sort(reverse=True)
    evidence += [f"hypothesis {key} (stage {stage}): reproduces {explained:.1%} of the wrong elements, agrees on "
                 f"{agree:.1%} of all" for explained, agree, stage, key, _ in found[:3]]
    if silent:
        evidence.append(f"not weighed (on this case they equal the reference where the output is wrong): "
                        f"{', '.join(silent)}")
    if not found:
        return (f"No classic bug reproduces the wrong elements; what is known: {_where_wrong(data, wrong)}.",
                evidence, "localised")
    explained, agree, stage, key, meaning = found[0]
    if explained >= EXPLAINS and agree >= EXPLAINS:
        return (f"Stage {stage}: {meaning}; a reference computed with that bug reproduces {explained:.1%} of the "
                f"wrong elements and agrees on {agree:.1%} of all.", evidence, key)
    return (f"No classic bug reproduces the wrong elements; what is known: {_where_wrong(data, wrong)}.", evidence,
            "localised")
