"""Text for the report's PNG pictures (arena/report/figures.py), with no font file or plotting library: a 3 x 5 pixel
font of digits, letters (drawn as capitals) and a little punctuation, scaled by whole pixels."""
from __future__ import annotations

import torch

_FONT = {
    "0": "111101101101111", "1": "010110010010111", "2": "111001111100111", "3": "111001111001111",
    "4": "101101111001001", "5": "111100111001111", "6": "111100111101111", "7": "111001001010010",
    "8": "111101111101111", "9": "111101111001111",
    "a": "010101111101101", "b": "110101110101110", "c": "011100100100011", "d": "110101101101110",
    "e": "111100110100111", "f": "111100110100100", "g": "011100101101011", "h": "101101111101101",
    "i": "111010010010111", "j": "001001001101010", "k": "101101110101101", "l": "100100100100111",
    "m": "101111111101101", "n": "110101101101101", "o": "010101101101010", "p": "110101110100100",
    "q": "010101101110011", "r": "110101110101101", "s": "011100010001110", "t": "111010010010010",
    "u": "101101101101111", "v": "101101101101010", "w": "101101111111101", "x": "101101010101101",
    "y": "101101010010010", "z": "111001010100111",
    " ": "000000000000000", ".": "000000000000010", ",": "000000000010100", ":": "000010000010000",
    "%": "101001010100101", "(": "001010010010001", ")": "100010010010100", "-": "000000111000000",
    "/": "001001010100100", "+": "000010111010000", "=": "000111000111000", "±": "010111010000111",
    "|": "010010010010010", "_": "000000000000111", "<": "001010100010001",
    ">": "100010001010100", ";": "000010000010100",
}
_SUBSTITUTE = {"µ": "u", "×": "x", "−": "-"}


def text_width(text: str, scale: int = 2) -> int:
    return len(text) * 4 * scale


def draw_text(image: torch.Tensor, x: int, y: int, text: str, colour=(0, 0, 0), scale: int = 2):
    """Write `text` into the [H, W, 3] uint8 `image` with its top-left corner at (x, y), clipped at the edges."""
    height, width, _ = image.shape
    paint = torch.tensor(colour, dtype=torch.uint8)
    for i, char in enumerate(text.lower()):
        bits = _FONT.get(_SUBSTITUTE.get(char, char), "000000000000000")
        left = x + i * 4 * scale
        for row in range(5):
            for column in range(3):
                if bits[row * 3 + column] == "1":
                    top, start = y + row * scale, left + column * scale
                    if 0 <= top < height and 0 <= start < width:
                        image[top:top + scale, start:start + scale] = paint


def strip_height(lines: int, scale: int = 2) -> int:
    """Rows of the white strip `titled` puts above a picture for `lines` lines of text."""
    return lines * 7 * scale + 6


def titled(image: torch.Tensor, lines: list[str], scale: int = 2) -> torch.Tensor:
    """`image` under a white strip holding `lines` of text, widened (white on the right) to fit the longest."""
    height, width, _ = image.shape
    line_height = 7 * scale
    wide = max([width] + [text_width(line, scale) + 8 for line in lines])
    strip = strip_height(len(lines), scale)
    out = torch.full((height + strip, wide, 3), 255, dtype=torch.uint8)
    out[strip:, :width] = image
    for i, line in enumerate(lines):
        draw_text(out, 4, 3 + i * line_height, line, scale=scale)
    return out
