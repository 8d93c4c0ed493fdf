"""Write the engine's part of every task.yml's `files:` manifest from the arena/ tree (or check that it is current).

    python3 tasks/manifests.py           # rewrite the manifests in place
    python3 tasks/manifests.py --check   # exit 1, naming each task.yml whose manifest differs

The competition's runner copies only the files a task.yml lists, flat (it creates no folders): every module of
arena/ travels as `arena.<dotted path>.py` and arena/__init__.py rebuilds the package from them. The entries before
the engine's comment line (submission, task, reference, utils, eval, task.yml, a task's own helpers) are the task's
own and stay as written; the engine's entries after it are generated, one per module, in path order.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "arena"
ENGINE_COMMENT = ("  # the engine, flat (the runner writes files, not folders): arena/__init__.py rebuilds arena/ "
                  "from these")


def task_ymls() -> list[Path]:
    return [ROOT / "task.yml"] + sorted(ROOT.glob("tasks/*/task.yml"))


def engine_entries(task_yml: Path) -> list[str]:
    """One `files:` line per module of arena/, its source relative to the task.yml's folder."""
    modules = sorted(PACKAGE.rglob("*.py"), key=lambda p: (p != PACKAGE / "__init__.py", p.relative_to(PACKAGE).parts))
    lines = []
    for path in modules:
        parts = path.relative_to(PACKAGE).parts
        name = "arena.py" if path == PACKAGE / "__init__.py" else "arena." + ".".join(parts)
        source = Path(os.path.relpath(path, task_yml.parent)).as_posix()
        lines.append(f'  - {{"name": "{name}", "source": "{source}"}}')
    return lines


def regenerated(task_yml: Path) -> str:
    """The task.yml's text with its engine entries generated: the block of `files:` lines after the engine
    comment, up to the next top-level key, is replaced."""
    lines = task_yml.read_text().splitlines()
    try:
        start = lines.index("files:")
        comment = lines.index(ENGINE_COMMENT, start)
    except ValueError:
        raise SystemExit(f"{task_yml.relative_to(ROOT)}: no `files:` key with the engine comment line") from None
    end = comment + 1
    while end < len(lines) and (lines[end].startswith("  - ") or lines[end].startswith("  #")):
        end += 1
    return "\n".join(lines[:comment + 1] + engine_entries(task_yml) + lines[end:]) + "\n"


def main(argv: list[str]) -> int:
    check = argv[1:] == ["--check"]
    if argv[1:] not in ([], ["--check"]):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    stale = []
    for task_yml in task_ymls():
        text = regenerated(task_yml)
        if text != task_yml.read_text():
            stale.append(str(task_yml.relative_to(ROOT)))
            if not check:
                task_yml.write_text(text)
    if check and stale:
        print(f"the engine's files: manifest is out of date in {', '.join(stale)}: run python3 tasks/manifests.py",
              file=sys.stderr)
        return 1
    if not check:
        print(f"rewrote {len(stale)} of {len(task_ymls())} task.yml manifests" if stale else "every manifest is current")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
