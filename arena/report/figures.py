"""Pictures of a run, as PNG bytes (no plotting library): the error heatmap of a wrong output beside the
reference's magnitude, the distribution of timed samples, and the share of the speed of light. Used by the HTML
report (`--report`) and `--plots DIR`.

Heatmap colours: |out - ref| on a log scale from pale yellow (tiny) to dark red (the largest error), white where
an element is exact, light green where it differs within the tolerance; NaN/Inf in the output (where the
reference is finite) magenta; still the pre-filled c (never written) blue. A cell of a downsampled map takes
the worst element under it: one wrong element stays visible.
"""
from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

import torch

from arena.report.glyphs import draw_text, text_width, titled
from arena.taskdef.checking import mismatch_mask

ERROR_TITLE_LINES, REFERENCE_TITLE_LINES = 3, 2     # the text above a heatmap in --plots (strip_height)

MAX_SIDE = 512
EXACT = (255, 255, 255)
WITHIN = (198, 233, 198)
NONFINITE = (230, 0, 200)
UNTOUCHED = (40, 90, 230)
HEAT = [(255, 245, 170), (254, 178, 76), (240, 59, 32), (128, 0, 38)]        # small -> large error
GREYS = [(245, 245, 245), (20, 20, 20)]                                          # small -> large |ref|
LEGEND = {"exact": EXACT, "within tolerance": WITHIN, "NaN/Inf": NONFINITE, "never written (pre-filled c)": UNTOUCHED}


def png(rgb: torch.Tensor) -> bytes:
    """A [H, W, 3] uint8 tensor as PNG bytes (8-bit RGB, no filtering)."""
    height, width, _ = rgb.shape
    raw = torch.cat([torch.zeros((height, 1), dtype=torch.uint8), rgb.reshape(height, width * 3)], dim=1)

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) +
            chunk(b"IDAT", zlib.compress(raw.contiguous().numpy().tobytes(), 6)) + chunk(b"IEND", b""))


def _ramp(t: torch.Tensor, stops) -> torch.Tensor:
    """t in [0, 1] -> RGB along the colour stops."""
    stops = torch.tensor(stops, dtype=torch.float32)
    pos = t.clamp(0, 1) * (len(stops) - 1)
    low = pos.floor().long().clamp(max=len(stops) - 2)
    frac = (pos - low).unsqueeze(-1)
    return (stops[low] * (1 - frac) + stops[low + 1] * frac).round().to(torch.uint8)


def _pool(x: torch.Tensor, how: str) -> torch.Tensor:
    """[H, W] -> at most MAX_SIDE x MAX_SIDE by max (or mean) over blocks."""
    h, w = x.shape
    fh, fw = -(-h // MAX_SIDE), -(-w // MAX_SIDE)
    if fh == fw == 1:
        return x
    pad = torch.nn.functional.pad(x[None, None], (0, -w % fw, 0, -h % fh), value=0.0)
    pooled = torch.nn.functional.max_pool2d(pad, (fh, fw)) if how == "max" else torch.nn.functional.avg_pool2d(pad, (fh, fw))
    return pooled[0, 0]


@dataclass
class ErrorFigure:
    """One batch (or group) of a wrong output: the two pictures and what they show."""
    label: str            # "batch 0", "group 2 (72x384x256)"
    shape: tuple          # rows, columns of the full output
    error_png: bytes
    reference_png: bytes
    max_error: float
    wrong: int
    error_titled_png: bytes = b""       # the same pictures with a title and legend: readable alone (--plots)
    reference_titled_png: bytes = b""


def error_figure(label: str, out: torch.Tensor, ref: torch.Tensor, prefilled: torch.Tensor | None,
                 rtol: float, atol: float) -> ErrorFigure:
    """The heatmap of |out - ref| for one [M, N] slice and the map of |ref|, both at most 512 x 512."""
    o, r = out.detach().double().cpu(), ref.detach().double().cpu()
    diff = (o - r).abs()
    finite_ref = torch.isfinite(r)
    nonfinite = ~torch.isfinite(o) & finite_ref
    within = ~mismatch_mask(o, r, rtol, atol)
    wrong = ~within & ~nonfinite & finite_ref
    untouched = torch.zeros_like(wrong)
    if prefilled is not None and prefilled.shape == out.shape:
        p = prefilled.detach().cpu()
        same = out.detach().cpu().view(torch.int16) == p.view(torch.int16) if out.dtype == torch.float16 else out.detach().cpu() == p
        untouched = same & wrong
    top = float(diff[wrong].max()) if wrong.any() else 0.0
    floor = max(atol, top * 1e-6)
    # per-element class (0 exact, 1 within, 2 wrong, 3 untouched, 4 nonfinite): the worst class of a cell wins
    klass = torch.where(diff == 0, 0.0, 1.0)
    klass = torch.where(wrong, 2.0, klass)
    klass = torch.where(untouched, 3.0, klass)
    klass = torch.where(nonfinite, 4.0, klass)
    cls = _pool(klass, "max")
    level = _pool(torch.where(wrong, diff, torch.zeros_like(diff)), "max")
    span = max(1e-12, torch.log10(torch.tensor(max(top, floor * 10) / floor)).item())
    heat = _ramp(((level.clamp(min=floor) / floor).log10() / span).float(), HEAT)
    image = torch.empty((*cls.shape, 3), dtype=torch.uint8)
    for value, colour in ((0, EXACT), (1, WITHIN), (3, UNTOUCHED), (4, NONFINITE)):
        image[cls == value] = torch.tensor(colour, dtype=torch.uint8)
    image[cls == 2] = heat[cls == 2]
    magnitude = _pool(torch.where(finite_ref, r.abs(), torch.zeros_like(r)), "mean")
    mag_top = float(magnitude.max()) if magnitude.numel() else 0.0
    grey = _ramp((magnitude / mag_top).float() if mag_top > 0 else torch.zeros_like(magnitude).float(), GREYS)
    rows, columns = out.shape[0], out.shape[1] if out.dim() > 1 else 1
    error_lines = [f"{label}: |out - ref|, log scale, {rows} rows x {columns} columns",
                   f"yellow to dark red: small to largest error ({top:.3g}); white exact;",
                   "green within tolerance; magenta nan/inf; blue never written"]
    reference_lines = [f"{label}: |ref|, {rows} rows x {columns} columns", "white 0 to black the largest"]
    heat, grey = _scaled(image), _scaled(grey)
    return ErrorFigure(label, tuple(out.shape), png(heat), png(grey), top, int(wrong.sum() + nonfinite.sum()),
                       png(titled(heat, error_lines)), png(titled(grey, reference_lines)))


def _scaled(image: torch.Tensor, least: int = 160) -> torch.Tensor:
    """Small maps enlarged by whole pixels (a 40-row group stays legible)."""
    h, w, _ = image.shape
    factor = max(1, min(least // max(1, min(h, w)), MAX_SIDE // max(h, w)))
    return image.repeat_interleave(factor, 0).repeat_interleave(factor, 1) if factor > 1 else image


def error_figures(output, expected, prefilled, rtol: float, atol: float, groups: list[str] | None = None) -> list[ErrorFigure]:
    """Figures for every batch of one tensor output ([M, N, L]), or every wrong group of a list output."""
    figures = []
    if isinstance(output, (list, tuple)):
        for i, (out, ref) in enumerate(zip(output, expected)):
            if not isinstance(out, torch.Tensor) or out.shape != ref.shape:
                continue
            pre = prefilled[i] if prefilled is not None and i < len(prefilled) else None
            fig = error_figure((groups[i] if groups else f"group {i}"), _as_2d(out), _as_2d(ref),
                               _as_2d(pre) if pre is not None else None, rtol, atol)
            if fig.wrong:
                figures.append(fig)
        return figures
    if not isinstance(output, torch.Tensor) or output.shape != expected.shape:
        return []
    out3, ref3 = _as_3d(output), _as_3d(expected)
    pre3 = _as_3d(prefilled) if isinstance(prefilled, torch.Tensor) and prefilled.shape == output.shape else None
    for b in range(out3.shape[2]):
        fig = error_figure(f"batch {b}", out3[:, :, b], ref3[:, :, b], pre3[:, :, b] if pre3 is not None else None,
                           rtol, atol)
        if fig.wrong or b == 0:
            figures.append(fig)
    return figures


def _as_3d(t: torch.Tensor) -> torch.Tensor:
    return t if t.dim() == 3 else t.unsqueeze(-1) if t.dim() == 2 else t.reshape(t.shape[0], -1, 1)


def _as_2d(t: torch.Tensor) -> torch.Tensor:
    return t[:, :, 0] if t.dim() == 3 else t if t.dim() == 2 else t.reshape(t.shape[0], -1)


def samples_histogram(samples_ns: list[float], width: int = 480, height: int = 160, bins: int = 48,
                      title: str = "timed samples") -> bytes:
    """Bars of the timed samples' distribution (min at the left edge, max at the right), the mean in red, with
    a title, both axes labelled (samples per bin; µs per call) and a legend."""
    values = torch.tensor(samples_ns, dtype=torch.float64)
    low, high = float(values.min()), float(values.max())
    edges = max(high - low, 1e-9)
    index = ((values - low) / edges * (bins - 1)).round().long()
    counts = torch.bincount(index, minlength=bins).double()
    image = torch.full((height, width, 3), 255, dtype=torch.uint8)
    bar = width // bins
    for i, count in enumerate(counts.tolist()):
        top = height - int(round((height - 4) * count / max(1.0, float(counts.max()))))
        image[top:, i * bar:(i + 1) * bar - 1] = torch.tensor((60, 110, 200), dtype=torch.uint8)
    mean_x = int(round((float(values.mean()) - low) / edges * (bins - 1) * bar + bar / 2))
    image[:, max(0, mean_x - 1):mean_x + 1] = torch.tensor((220, 30, 30), dtype=torch.uint8)
    image[height - 1, :] = 0
    image[:, 0] = 0
    left, bottom = 56, 34           # room for the y labels and the x labels with the axis name
    canvas = torch.full((height + bottom, width + left + 8, 3), 255, dtype=torch.uint8)
    canvas[:height, left:left + width] = image
    draw_text(canvas, 4, 0, f"{int(counts.max())}")
    draw_text(canvas, 4, height - 10, "0")
    draw_text(canvas, 4, height // 2 - 5, "samples")
    draw_text(canvas, left, height + 4, f"{low / 1e3:.3f}")
    right = f"{high / 1e3:.3f}"
    draw_text(canvas, left + width - text_width(right), height + 4, right)
    axis = "us per call"
    draw_text(canvas, left + (width - text_width(axis)) // 2, height + 20, axis)
    return png(titled(canvas, [title, f"n = {len(samples_ns)} samples; red line: the mean, "
                                      f"{float(values.mean()) / 1e3:.3f} us"]))


def sol_bar(mean_us: float, sol_us: float, width: int = 480, height: int = 28) -> bytes:
    """A bar as long as the share of the speed of light reached (sol / mean), the rest grey, titled with the
    share and both times."""
    share = max(0.0, min(1.0, sol_us / mean_us)) if mean_us > 0 else 0.0
    image = torch.full((height, width, 3), 225, dtype=torch.uint8)
    image[:, :max(1, int(round(width * share)))] = torch.tensor((40, 160, 90), dtype=torch.uint8)
    image[0, :], image[-1, :], image[:, 0], image[:, -1] = 0, 0, 0, 0
    return png(titled(image, [f"share of the speed of light: {100 * share:.1f}%",
                              f"green: sol {sol_us:g} us (b200) / mean {mean_us:.3f} us; full bar = 100%"]))
