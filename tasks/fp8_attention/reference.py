"""fp8_attention reference: scaled dot-product attention on FP8 e4m3 Q, K, V with per-tensor scales.

`generate_input(b, h, s, d, causal, seed, data="random")` returns (q, k, v, q_scale, k_scale, v_scale, causal,
out): q, k, v float8_e4m3fn [B, H, S, D] (contiguous); each scale float32 [1], a power of two, so the real
values fp8 × scale are exact in fp32; causal a bool (key j is visible to query i when j <= i); out bfloat16
[B, H, S, D] pre-filled with randn. A kernel writes out = softmax(Q·Kᵀ/√D, masked) · V and returns out.

Data: Q and K are N(0, 1) times a per-head factor in [0.5, 2] (some heads sharp, some flat), V is N(0, 1)
with 1 % outliers of ±(4..8), quantized per tensor with the scale 2^ceil(log2(amax / 448)). `data` selects
the structured probes (docs/tasks.md): "uniform_q" (Q = 0: every visible key weighs the same, isolating the
mask and the normalisation), "onehot_v" (row j of V is the unit vector e_(j mod D), scale 1: each output
row is the attention probabilities, folded mod D), "large_scores" (scores up to about 400: a softmax without
its max subtraction overflows).

`ref_kernel` computes in fp32 from the exactly dequantized inputs (TF32 off), softmax with the max
subtracted, rounds once to bf16. tests/test_fp8_attention.py checks it against an fp64 model that shares no
code with it. `diagnose_failure` names the stage (scores, softmax, output) and the classic bug a wrong output
matches; `PROBES` are the structured inputs `eval.py diagnose` runs.
"""
import math

import torch

from task import input_t, output_t
import attention_envelope
from arena.taskdef.checking import EnvelopeCheck
from arena.taskdef.tolerance import tolerance_beside

E4M3_MAX = 448.0
DISTRIBUTIONS = ("random", "uniform_q", "onehot_v", "large_scores")


def _device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def quantize(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-tensor FP8 e4m3 with a power-of-two scale: (fp8 tensor, float32 [1] scale)."""
    amax = float(x.abs().max()) or 1.0
    scale = 2.0 ** math.ceil(math.log2(amax / E4M3_MAX))
    return (x / scale).to(torch.float8_e4m3fn), torch.tensor([scale], dtype=torch.float32, device=x.device)


def generate_input(b: int, h: int, s: int, d: int, causal: int, seed: int, data: str = "random"):
    if data not in DISTRIBUTIONS:
        raise ValueError(f"unknown data distribution {data!r}: use one of {', '.join(DISTRIBUTIONS)}")
    device = _device()
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    shape = (b, h, s, d)
    sharpness = 0.5 + 1.5 * torch.rand(1, h, 1, 1, generator=gen, device=device)
    q = torch.randn(shape, generator=gen, device=device) * sharpness
    k = torch.randn(shape, generator=gen, device=device) * sharpness
    v = torch.randn(shape, generator=gen, device=device)
    outliers = torch.rand(shape, generator=gen, device=device) < 0.01
    v = torch.where(outliers, torch.sign(v) * (4 + 4 * torch.rand(shape, generator=gen, device=device)), v)
    if data == "uniform_q":
        q = torch.zeros(shape, device=device)
    elif data == "large_scores":
        q = q * (20.0 / sharpness)
        k = k * (20.0 / sharpness)
    out = torch.randn(shape, generator=gen, device=device).to(torch.bfloat16)
    (q8, qs), (k8, ks) = quantize(q), quantize(k)
    if data == "onehot_v":
        rows = torch.arange(s, device=device) % d
        v8 = torch.nn.functional.one_hot(rows, d).to(torch.float32).expand(b, h, s, d).contiguous()
        v8, vs = v8.to(torch.float8_e4m3fn), torch.ones(1, dtype=torch.float32, device=device)
    else:
        v8, vs = quantize(v)
    return q8, k8, v8, qs, ks, vs, bool(causal), out


def attention_fp32(q, k, v, causal: bool, *, softmax_scale=None, subtract_max=True, normalise=True):
    """The reference computation on real-valued (already dequantized) fp32 tensors [B, H, S, D]; the
    keywords produce the classic bugs for the diagnosis."""
    d = q.shape[-1]
    scale = 1.0 / math.sqrt(d) if softmax_scale is None else softmax_scale
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale
    if causal:
        s = q.shape[-2]
        hidden = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(hidden, float("-inf"))
    if subtract_max:
        scores = scores - scores.amax(dim=-1, keepdim=True)
    weights = torch.exp(scores)
    if normalise:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return torch.matmul(weights, v)


def dequantize(x8: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return x8.to(torch.float32) * scale.to(torch.float32)


def ref_kernel(data: input_t) -> output_t:
    q8, k8, v8, qs, ks, vs, causal, out = data
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        result = attention_fp32(dequantize(q8, qs), dequantize(k8, ks), dequantize(v8, vs), causal)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    out.copy_(result.to(out.dtype))
    return out


# the precision envelope (attention_envelope.py); task.yml's `tolerance` is what the diagnosis matches hypotheses
# with
check_implementation = EnvelopeCheck(ref_kernel, **tolerance_beside(__file__), outside=attention_envelope.outside)

# `eval.py diagnose` runs each as a probe besides the random case and the repeated calls: name -> case keys.
PROBES = {
    "uniform scores (Q = 0: isolates the causal mask and the softmax's normalisation)": {"data": "uniform_q"},
    "one-hot V (each output row is the attention probabilities: isolates the scores and the softmax)":
        {"data": "onehot_v"},
    "large scores (up to about 400: a softmax without its max subtraction overflows)": {"data": "large_scores"},
}


def contrast_probes(case: dict) -> dict[str, dict]:
    """`eval.py diagnose`'s probes where this case's shape hides a classic bug: a missing causal mask is the
    reference on a non-causal case (a mask where none belongs, on a causal one), and a head/row stride swap is no
    swap with one head. Name -> the case keys that change."""
    probes = {}
    if case.get("causal"):
        probes["the same shape without a causal mask (shows a mask applied where none belongs)"] = {"causal": 0}
    else:
        probes["the same shape with a causal mask (shows a missing mask)"] = {"causal": 1}
    if case.get("h") == 1:
        probes["two heads (shows a head/row stride swap, which one head hides)"] = {"h": 2}
    return probes


# ---- why an output is wrong: the stage and the classic bug -------------------------------------------------

def _bug_outputs(data):
    """(stage, key, what it means, function computing that wrong output in fp32) for each classic bug."""
    q8, k8, v8, qs, ks, vs, causal, _ = data
    q, k, v = dequantize(q8, qs), dequantize(k8, ks), dequantize(v8, vs)
    d, s = q.shape[-1], q.shape[-2]

    def swapped(x8, scale):        # memory read as [B, S, H, D]: the stride between heads and rows exchanged
        b, h = x8.shape[0], x8.shape[1]
        return dequantize(x8.reshape(b, s, h, d).transpose(1, 2), scale)

    def diagonal_hidden():
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d)
        hidden = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(0)
        return torch.matmul(torch.softmax(scores.masked_fill(hidden, float("-inf")), -1), v)

    bugs = [
        ("scores", "no_softmax_scale", "the scores miss the 1/√D factor (softmax over Q·Kᵀ instead of Q·Kᵀ/√D)",
         lambda: attention_fp32(q, k, v, causal, softmax_scale=1.0)),
        ("scores", "qk_scales_ignored", "the scores ignore q_scale and k_scale (the FP8 values used as they are: "
         "were the scales loaded before use?)", lambda: attention_fp32(q8.float(), k8.float(), v, causal)),
        ("scores", "q_scale_twice", "q_scale·k_scale applied twice",
         lambda: attention_fp32(q * qs * ks, k, v, causal)),
        ("scores", "causal_ignored", "no causal mask (every key visible to every query)",
         lambda: attention_fp32(q, k, v, False)),
        ("scores", "causal_where_none", "a causal mask where the case has none",
         lambda: attention_fp32(q, k, v, True)),
        ("scores", "diagonal_hidden", "the causal mask also hides the diagonal (key i from query i: use j <= i)",
         diagonal_hidden),
        ("scores", "k_heads_rows_swapped", "K read with the head and row strides exchanged (as [B, S, H, D]: a "
         "wrong leading dimension)", lambda: attention_fp32(q, swapped(k8, ks), v, causal)),
        ("scores", "q_heads_rows_swapped", "Q read with the head and row strides exchanged (as [B, S, H, D])",
         lambda: attention_fp32(swapped(q8, qs), k, v, causal)),
        ("scores", "k_transposed", "K used untransposed (Q·K instead of Q·Kᵀ; square heads only)",
         lambda: attention_fp32(q, k.transpose(-1, -2), v, causal) if s == d else None),
        ("softmax", "not_normalised", "the softmax is not normalised (no division by the row sum)",
         lambda: attention_fp32(q, k, v, causal, normalise=False)),
        ("output", "v_scale_ignored", "the output ignores v_scale", lambda: attention_fp32(q, k, v8.float(), causal)),
        ("output", "v_clipped", "V clipped to ±1.0 (values saturated at a bound before the P·V product)",
         lambda: attention_fp32(q, k, v.clamp(-1.0, 1.0), causal)),
        ("output", "v_heads_rows_swapped", "V read with the head and row strides exchanged (as [B, S, H, D])",
         lambda: attention_fp32(q, k, swapped(v8, vs), causal)),
    ]
    return bugs


def _saturation(output: torch.Tensor) -> str:
    """Values stuck at a bound: the largest |value| held by more than 5 % of the elements."""
    flat = output.float().flatten()
    finite = flat[torch.isfinite(flat)]
    if finite.numel() == 0:
        return ""
    top = float(finite.abs().max())
    share = float((finite.abs() == top).float().mean())
    return f"{share:.0%} of the output sits exactly at ±{top:g}: values stuck at a bound" if top and share > 0.05 \
        else ""


EXPLAINS = 0.99       # a hypothesis is named only when it reproduces this share of the wrong elements and of all
SUPPORTS = 0.5        # and when it differs from the reference (beyond the envelope) on this share of the wrong elements


def _where_wrong(wrong: torch.Tensor, causal: bool) -> str:
    """What is known without a hypothesis: which batches, heads and query rows hold the wrong elements."""
    from arena.diagnose.common import index_pattern
    heads = torch.nonzero(wrong.any(dim=(2, 3))).tolist()
    rows = wrong.any(dim=(0, 1, 3)).cpu()
    first = int(torch.nonzero(rows).flatten()[0])
    where = ", ".join(f"({b}, {h})" for b, h in heads[:6]) + (f" and {len(heads) - 6} more" if len(heads) > 6 else "")
    return (f"{int(wrong.sum())} wrong elements in {len(heads)} of {wrong.shape[0] * wrong.shape[1]} (batch, head) "
            f"pairs {where}; query rows: {index_pattern(rows, 'row', 64)} (first wrong row {first}); a "
            f"{'causal' if causal else 'non-causal'} case")


def diagnose_failure(data, output, expected, rtol: float, atol: float):
    """(summary, evidence lines, key) for a wrong attention output: the stage and classic bug when a reference
    computed with it reproduces the wrong elements and the right ones (matched within the precision envelope);
    otherwise what is known (which heads and rows are wrong), NaN/Inf or saturation. Called by the engine's
    failure hook (arena/diagnose/explain.py) after a failed check."""
    if not isinstance(output, torch.Tensor) or output.shape != expected.shape:
        return None
    evidence = []
    nonfinite = int((~torch.isfinite(output.float())).sum())
    if nonfinite:
        rows = (~torch.isfinite(output.float())).any(-1)
        evidence.append(f"{nonfinite} NaN/Inf elements in {int(rows.sum())} output rows")
    stuck = _saturation(output)
    if stuck:
        evidence.append(stuck)
    o, allowance = attention_envelope.envelope(data)
    wrong, note = attention_envelope.outside(data, output)
    if note:
        evidence.append(note)
    got = output.to(o.dtype)
    best = []
    for stage, key, meaning, compute in _bug_outputs(data):
        try:
            candidate = compute()
        except (RuntimeError, ValueError):
            continue
        if candidate is None:
            continue
        want = candidate.to(output.dtype).to(o.dtype)
        # A bug that equals the reference (within the envelope) where the output is wrong cannot be told apart
        # on this case (a causal mask on a causal case, a Q stride swap with H = 1): never named.
        differs = ((want - o).abs() > allowance) | (torch.isnan(want) ^ torch.isnan(o))
        if not bool(wrong.any()) or float(differs[wrong].float().mean()) < SUPPORTS:
            continue
        close = (got - want).abs() <= allowance + atol + rtol * want.abs()
        close |= torch.isnan(got) & torch.isnan(want)
        explained = float(close[wrong].float().mean())
        best.append((explained, float(close.float().mean()), stage, key, meaning))
    best.sort(reverse=True)
    evidence += [f"hypothesis {key} ({stage}): reproduces {explained:.1%} of the wrong elements, agrees on "
                 f"{agree:.1%} of all" for explained, agree, stage, key, _ in best[:3]]
    if best and best[0][0] >= EXPLAINS and best[0][1] >= EXPLAINS:
        explained, agree, stage, key, meaning = best[0]
        return (f"Stage {stage}: {meaning}; a reference computed with that bug reproduces {explained:.1%} of the "
                f"wrong elements and agrees on {agree:.1%} of all.", evidence, key)
    if nonfinite:
        return ("The output holds NaN/Inf where the reference is finite: a softmax without its max subtraction "
                "overflows exp() on large scores, or a fully masked row divided by a zero sum.", evidence,
                "nonfinite")
    if stuck:
        return (f"Saturation: {stuck}. Were values clipped before or after the P·V product?", evidence,
                "saturated")
    if not bool(wrong.any()):
        return None
    return (f"No classic bug reproduces the wrong elements; what is known: {_where_wrong(wrong, bool(data[6]))}.",
            evidence, "localised")
