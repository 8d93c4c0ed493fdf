"""Test specs: the competition's `key: value; key: value` lines, and seeds.

Two grammars exist in the official evaluators; both are accepted here:
- plain: keys are letters, values an int or a word (`m: 128; n: 256; seed: 1111`);
- grouped: keys may hold `_`, values may also be lists/tuples of ints (`m: [96, 128]; g: 2`).
Blank lines are skipped. Values that parse as ints become ints.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

_PART = re.compile(r"\s*([a-zA-Z_]+)\s*:\s*(\[[^\]]*\]|\([^)]*\)|[a-zA-Z_]+|[+-]?[0-9]+)\s*")


class SpecError(ValueError):
    """A spec line that does not parse; the message names the line and the part."""


@dataclass
class Case:
    args: dict
    spec: str
    extra: dict = field(default_factory=dict)   # our own per-case facts (speed of light), never passed to the task


def _value(text: str):
    if text[0] in "[(":
        inner = text[1:-1].strip()
        try:
            return tuple(int(v) for v in inner.split(",") if v.strip())
        except ValueError:
            raise SpecError(f"list value {text!r} must hold integers") from None
    try:
        return int(text)
    except ValueError:
        return text


def parse_spec_line(line: str) -> dict:
    args = {}
    for part in line.split(";"):
        if not part.strip():
            continue
        match = _PART.fullmatch(part)
        if not match:
            raise SpecError(f"cannot parse {part.strip()!r} in spec {line.strip()!r} (expected `key: value`)")
        args[match.group(1)] = _value(match.group(2))
    return args


def parse_spec_text(text: str) -> list[Case]:
    cases = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            cases.append(Case(args=parse_spec_line(line), spec=line.strip()))
        except SpecError as error:
            raise SpecError(f"line {number}: {error}") from None
    return cases


def format_spec(args: dict) -> str:
    """The runner's way of writing a spec: `k: v` joined by `; `, Python repr for lists."""
    return "; ".join(f"{k}: {list(v) if isinstance(v, tuple) else v}" for k, v in args.items())


def combine_seed(case_seed: int, secret: int) -> int:
    """The competition's combination of a case seed with the secret seed (Cantor pairing plus a)."""
    a, b = case_seed, secret
    return int(a + (a + b) * (a + b + 1) // 2)


def apply_secret_seed(cases: list[Case], secret: int | None) -> list[Case]:
    """Every case with a `seed` gets it combined with the secret; the spec text stays as written."""
    if secret is None:
        return cases
    for case in cases:
        if "seed" in case.args:
            case.args["seed"] = combine_seed(case.args["seed"], secret)
    return cases
