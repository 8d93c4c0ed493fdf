"""Test specs: the competition's `key: value; key: value` lines, and seeds.

Two grammars exist in the official evaluators; both are accepted here:
- plain: keys are letters, values an int or a word (`m: 128; n: 256; seed: 1111`);
- grouped: keys may hold `_`, values may also be lists/tuples of ints (`m: [96, 128]; g: 2`).
Blank lines are skipped. Values that parse as ints become ints.
"""
from __future__ import annotations

import hashlib

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
    """A case seed combined with the secret seed: 64 bits of SHA-256 of both. The competition pairs them
    (Cantor pairing plus the case seed), which a submission inverts from the inputs it sees: brute-forcing the
    combined seed (about 2**33 values) gives the secret. A hash of both cannot be inverted, and its 64 bits
    cannot be brute-forced from the data. (So under a secret seed the inputs differ from the competition's.)"""
    digest = hashlib.sha256(f"nvfp4-arena:{secret}:{case_seed}".encode()).digest()
    return int.from_bytes(digest[:8], "little") % (2**64 - 2**32)


def apply_secret_seed(cases: list[Case], secret: int | None) -> list[Case]:
    """Every case with a `seed` gets it combined with the secret; the spec text stays as written."""
    if secret is None:
        return cases
    for case in cases:
        if "seed" in case.args:
            case.args["seed"] = combine_seed(case.args["seed"], secret)
    return cases


# ---- checking a case against its task's rules ---------------------------------------------------------
# task.yml `case_rules` maps each key a case may hold to its rule: `type` (int, ints: one int per group,
# word), `min`, `multiple_of`, `one_of`, `optional`, and for `ints` the key holding the group count
# (`per: g`). A case that breaks one gets one line naming the key and the problem.

def _int_problem(key: str, value, rule: dict) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return f"{key} must be an integer, got {value!r}"
    if rule.get("multiple_of") and value % rule["multiple_of"]:
        return f"{key} must be a multiple of {rule['multiple_of']}, got {value}"
    if "min" in rule and value < rule["min"]:
        return f"{key} must be at least {rule['min']}, got {value}"
    if "max" in rule and value > rule["max"]:
        return f"{key} must be at most {rule['max']}, got {value}"
    return None


def check_case(args: dict, rules: dict) -> str | None:
    """Why `args` breaks `rules` (one line), or None."""
    unknown = [key for key in args if key not in rules]
    if unknown:
        takes = ", ".join(k + (" (optional)" if r.get("optional") else "") for k, r in rules.items())
        return f"unknown key {unknown[0]!r} (this task takes {takes})"
    missing = [key for key, rule in rules.items() if key not in args and not rule.get("optional")]
    if missing:
        return f"missing {', '.join(missing)}"
    for key, value in args.items():
        rule = rules[key]
        kind = rule.get("type", "int")
        if kind == "int":
            problem = _int_problem(key, value, rule)
        elif kind == "ints":
            if not isinstance(value, (tuple, list)):
                problem = f"{key} must be a list with one integer per group, like [128, 256], got {value!r}"
            else:
                problem = next((p for p in (_int_problem(f"{key}[{i}]", v, rule) for i, v in enumerate(value)) if p),
                               None)
                count = args.get(rule.get("per", ""))
                if problem is None and isinstance(count, int) and len(value) != count:
                    problem = f"{key} must list {count} values ({rule['per']} = {count}), got {len(value)}"
        else:
            problem = None if isinstance(value, str) else f"{key} must be a word, got {value!r}"
        if problem is None and "one_of" in rule and value not in rule["one_of"]:
            problem = f"{key} must be one of {', '.join(map(str, rule['one_of']))}, got {value!r}"
        if problem:
            return problem
    return None
