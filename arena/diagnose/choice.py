"""Which case `eval.py diagnose` runs its probes on: the first case `test` failed, or, without a test run, the
first case that turns on every switch of the contract (a causal attention case: a bug behind the mask shows
only there), with the reason in words for the report."""
from __future__ import annotations


def _switches(cases: list[dict]) -> set[str]:
    """Keys that are 0/1 switches in these cases (an int key that is both 0 and 1 somewhere, e.g. `causal`)."""
    seen: dict[str, set] = {}
    for case in cases:
        for key, value in case.items():
            if isinstance(value, int) and not isinstance(value, bool):
                seen.setdefault(key, set()).add(value)
    return {key for key, values in seen.items() if values == {0, 1}}


def choose_case(cases: list[dict], failed: list[int] | None = None) -> tuple[int, str]:
    """(index into `cases`, why): the first of `failed` (indices of the cases `test` failed), else the first
    case with every switch on and no `data` distribution of its own, else case 0."""
    if not cases:
        raise ValueError("no cases to choose from")
    if failed:
        first = min(failed)
        return first, f"case {first}: the first case `test` fails"
    switches = sorted(_switches(cases))
    for i, case in enumerate(cases):
        if switches and all(case.get(key) == 1 for key in switches) and case.get("data", "random") == "random":
            on = ", ".join(f"{key}: 1" for key in switches)
            return i, f"case {i}: no case failed, and it is the first with {on} (bugs behind that switch show only there)"
    return 0, "case 0: no case failed"
