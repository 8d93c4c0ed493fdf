"""Pictures of a run (no plotting library): the error heatmap of a wrong output beside the reference's magnitude
as PNG maps (one pixel per cell), each also as an SVG with its title and legend in real text; the distribution
of timed samples and the share of the speed of light as SVG charts. Used by the HTML report (`--report`) and
`--plots DIR`.

Heatmap colours: |out - ref| on a log scale from pale yellow (tiny) to dark red (the largest error), white where
an element is exact, light green where it differs within the tolerance; NaN/Inf in the output (where the
reference is finite) magenta; still the pre-filled c (never written) blue. A cell of a downsampled map takes
the worst element under it: one wrong element stays visible.
"""
from __future__ import annotations

import base64
import struct
import zlib
from dataclasses import dataclass
from html import escape

import torch

from arena.taskdef.checking import as_3d, mismatch_mask

FONT = 'font-family="system-ui, sans-serif" font-size="12"'
LINE = 16                   # px per line of text in an SVG

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
    error_title: tuple = ()             # the lines above each map where it stands alone (--plots: titled_map)
    reference_title: tuple = ()


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
    error_lines = [f"{label}: |out − ref|, log scale, {rows} rows × {columns} columns",
                   f"yellow to dark red: small to largest error ({top:.3g}); white exact;",
                   "green within tolerance; magenta NaN/Inf; blue never written (the pre-filled c)"]
    reference_lines = [f"{label}: |ref|, {rows} rows × {columns} columns", "white 0 to black the largest"]
    return ErrorFigure(label, tuple(out.shape), png(_scaled(image)), png(_scaled(grey)), top,
                       int(wrong.sum() + nonfinite.sum()), tuple(error_lines), tuple(reference_lines))


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
    out3, ref3 = as_3d(output), as_3d(expected)
    pre3 = as_3d(prefilled) if isinstance(prefilled, torch.Tensor) and prefilled.shape == output.shape else None
    for b in range(out3.shape[2]):
        fig = error_figure(f"batch {b}", out3[:, :, b], ref3[:, :, b], pre3[:, :, b] if pre3 is not None else None,
                           rtol, atol)
        if fig.wrong or b == 0:
            figures.append(fig)
    return figures


def _as_2d(t: torch.Tensor) -> torch.Tensor:
    return t[:, :, 0] if t.dim() == 3 else t if t.dim() == 2 else t.reshape(t.shape[0], -1)


def _svg(width: int, height: int, body: list[str]) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}"><rect width="{width}" height="{height}" fill="white"/>'
            + "".join(body) + "</svg>")


def _text(x: float, y: float, text: str, anchor: str = "start") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" {FONT}>{escape(text)}</text>'


def _lines(lines) -> list[str]:
    return [_text(4, LINE * (i + 1) - 4, line) for i, line in enumerate(lines)]


def titled_map(png_bytes: bytes, lines) -> str:
    """A PNG map (as `png` writes it) under its title and legend lines, as one SVG, the map drawn pixel for
    pixel at its own size (IHDR's width and height)."""
    width, height = struct.unpack(">II", png_bytes[16:24])
    strip = LINE * len(lines) + 6
    data = base64.b64encode(png_bytes).decode()
    image = (f'<image x="0" y="{strip}" width="{width}" height="{height}" style="image-rendering:pixelated" '
             f'href="data:image/png;base64,{data}"/>')
    return _svg(max(width, 560), height + strip, _lines(lines) + [image])


def samples_histogram(samples_ns: list[float], width: int = 480, height: int = 160, bins: int = 48,
                      title: str = "timed samples") -> str:
    """An SVG: bars of the timed samples' distribution (min at the left edge, max at the right), the mean in
    red, with a title, both axes labelled (samples per bin; µs per call) and a legend."""
    values = torch.tensor(samples_ns, dtype=torch.float64)
    low, high = float(values.min()), float(values.max())
    edges = max(high - low, 1e-9)
    index = ((values - low) / edges * (bins - 1)).round().long()
    counts = torch.bincount(index, minlength=bins).tolist()
    most = max(1, max(counts))
    lines = [title, f"n = {len(samples_ns)} samples; red line: the mean, {float(values.mean()) / 1e3:.3f} µs"]
    top, left, bar = LINE * len(lines) + 6, 56, width / bins
    body = _lines(lines)
    for i, count in enumerate(counts):
        tall = (height - 4) * count / most
        if tall > 0:
            body.append(f'<rect x="{left + i * bar:.1f}" y="{top + height - tall:.1f}" width="{bar - 1:.1f}" '
                        f'height="{tall:.1f}" fill="rgb(60,110,200)"/>')
    mean_x = left + (float(values.mean()) - low) / edges * (bins - 1) * bar + bar / 2
    body.append(f'<rect x="{mean_x - 1:.1f}" y="{top}" width="2" height="{height}" fill="rgb(220,30,30)"/>')
    body.append(f'<path d="M{left} {top} V{top + height} H{left + width}" stroke="black" fill="none"/>')
    body += [_text(left - 6, top + 10, str(most), "end"), _text(left - 6, top + height, "0", "end"),
             _text(left - 6, top + height / 2 + 4, "samples", "end"),
             _text(left, top + height + 16, f"{low / 1e3:.3f}"),
             _text(left + width, top + height + 16, f"{high / 1e3:.3f}", "end"),
             _text(left + width / 2, top + height + 30, "µs per call", "middle")]
    return _svg(left + width + 8, top + height + 36, body)


def sol_bar(mean_us: float, sol_us: float, width: int = 480, height: int = 28) -> str:
    """An SVG bar as long as the share of the speed of light reached (sol / mean), the rest grey, titled with the
    share and both times."""
    share = max(0.0, min(1.0, sol_us / mean_us)) if mean_us > 0 else 0.0
    lines = [f"share of the speed of light: {100 * share:.1f}%",
             f"green: sol {sol_us:g} µs (B200) / mean {mean_us:.3f} µs; full bar = 100%"]
    top = LINE * len(lines) + 6
    frame = (f'<rect x="0.5" y="{top + 0.5}" width="{width - 1}" height="{height - 1}" fill="rgb(225,225,225)" '
             'stroke="black"/>')
    reached = (f'<rect x="1" y="{top + 1}" width="{max(1.0, (width - 2) * share):.1f}" height="{height - 2}" '
               'fill="rgb(40,160,90)"/>')
    body = _lines(lines) + [frame, reached]
    return _svg(max(width, 560), top + height, body)
