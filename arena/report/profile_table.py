"""The profile table of `eval.py profile`, built by the evaluator from the numbers the worker measured.

The worker sends one row per profiled operation (name, calls, self and total CPU and device time in µs); the
parent checks each row (types, finite non-negative numbers, at most MAX_ROWS rows, names cleaned and cut) and
lays the table out itself, so a submission can misreport its own profile but cannot forge the table's form,
inject text or inflate it. Used by arena/worker/client.py.
"""
from __future__ import annotations

import math

from arena.isolation.worker_text import clean_text

MAX_ROWS = 40
COLUMNS = ("name", "calls", "self CPU µs", "CPU total µs", "self device µs", "device total µs")


class ProfileError(ValueError):
    """A row the worker sent is not a row of numbers; `str()` is one line."""


def _number(value, what: str) -> float:
    """A finite, non-negative number below 2**53 (an integer too large for a float is refused, not raised)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            (isinstance(value, int) and not 0 <= value < 2**53) or not math.isfinite(value) or value < 0:
        raise ProfileError(f"the profile's {what} is not a non-negative number")
    return float(value)


def build_table(rows) -> str:
    """The table text from the worker's rows, or raise ProfileError."""
    if not isinstance(rows, list) or len(rows) > MAX_ROWS:
        raise ProfileError(f"the profile must be a list of at most {MAX_ROWS} rows")
    checked = []
    for row in rows:
        if not isinstance(row, list) or len(row) != len(COLUMNS) or not isinstance(row[0], str):
            raise ProfileError("a profile row must be [name, calls, 4 times]")
        name = clean_text(row[0], 60).replace("\n", " ")
        calls = int(_number(row[1], "call count"))
        times = [_number(v, "time") for v in row[2:]]
        checked.append([name, str(calls)] + [f"{t:.1f}" for t in times])
    widths = [max(len(COLUMNS[i]), *(len(r[i]) for r in checked)) for i in range(len(COLUMNS))]
    line = "  ".join("-" * w for w in widths)
    head = "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(COLUMNS, widths)))
    body = ["  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(r, widths)))
            for r in checked]
    return "\n".join([line, head, line, *body, line])
