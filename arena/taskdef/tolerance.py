"""A task's tolerance, declared once in its task.yml (`tolerance: {rtol: ..., atol: ...}`): read by the task
definition (arena/taskdef/definition.py) and by the task's own reference.py, whose check_implementation uses it."""
from __future__ import annotations

from pathlib import Path

import yaml


class ToleranceError(ValueError):
    """A missing or malformed tolerance; `str()` is one line naming the file."""


def parse_tolerance(value, path: Path) -> dict:
    """{"rtol": float, "atol": float} from task.yml's `tolerance` value."""
    if not isinstance(value, dict) or set(value) != {"rtol", "atol"} or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in value.values()):
        raise ToleranceError(f"{path}: tolerance must be {{rtol: NUMBER, atol: NUMBER}} (both >= 0), got {value!r}")
    return {"rtol": float(value["rtol"]), "atol": float(value["atol"])}


def tolerance_beside(reference_file: str) -> dict:
    """The tolerance in the task.yml next to a task's reference.py: `make_match_reference(ref_kernel,
    **tolerance_beside(__file__))`, so the value lives in task.yml alone."""
    path = Path(reference_file).resolve().parent / "task.yml"
    try:
        config = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as error:
        raise ToleranceError(f"{path}: cannot read the task's tolerance: {error}") from None
    return parse_tolerance(config.get("tolerance") if isinstance(config, dict) else None, path)
