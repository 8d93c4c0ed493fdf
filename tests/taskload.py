"""A task's reference.py imported for a test, without leaving it behind: the `task` and `reference` modules
and sys.path are restored afterwards, so a later test's `import reference` still gets the top-level one."""
import contextlib
import sys


@contextlib.contextmanager
def task_reference(folder: str):
    from arena.taskdef.definition import load_task
    saved = {key: sys.modules.get(key) for key in ("task", "reference")}
    path = list(sys.path)
    try:
        yield load_task(folder).import_reference()
    finally:
        sys.path[:] = path
        for key, module in saved.items():
            if module is None:
                sys.modules.pop(key, None)
            else:
                sys.modules[key] = module
