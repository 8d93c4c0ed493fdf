"""The files a run writes besides its report on stdout (eval.py): every path checked before anything runs, and
the JSON rewritten after every finished case, so a run that is stopped or killed keeps what it measured.

Standard library only: eval.py checks the paths before torch is imported."""
from __future__ import annotations

import json
import os
import tempfile


def _try_writing_in(folder: str) -> str | None:
    """The reason no file can be created in `folder` (tried for real: root ignores permission bits, and a
    read-only mount shows only when written), or None."""
    try:
        handle, probe = tempfile.mkstemp(prefix=".write-check-", dir=folder)
    except OSError as error:
        return error.strerror or str(error)
    os.close(handle)
    os.unlink(probe)
    return None


def path_problem(path: str, what: str, folder: bool = False) -> str | None:
    """Why `path` (a file, or with `folder` a folder that may not exist yet) cannot be written, or None."""
    shown, path = path, os.path.abspath(path)
    if folder and os.path.isdir(path):
        problem = _try_writing_in(path)
        return f"cannot write the {what} {shown}: {problem}" if problem else None
    if os.path.exists(path) and folder:
        return f"cannot write the {what} {shown}: it is a file, not a folder"
    if os.path.isdir(path):
        return f"cannot write the {what} {shown}: it is a folder"
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        return f"cannot write the {what} {shown}: no folder {parent}"
    if os.path.exists(path) and not folder:
        try:
            with open(path, "ab"):
                pass
        except OSError as error:
            return f"cannot write the {what} {shown}: {error.strerror}"
        return None
    problem = _try_writing_in(parent)
    return f"cannot write the {what} {shown}: {problem} (in {parent})" if problem else None


def write_json_atomically(path: str, doc: dict):
    """Write `doc` to `path` through a file beside it, so a reader (or a kill mid-write) never sees half a file.
    A path that is no regular file (a pipe, /dev/stdout) is written in place: it is never replaced."""
    if os.path.exists(path) and not os.path.isfile(path):
        with open(path, "w") as f:
            json.dump(doc, f, indent=2, default=str)
        return
    folder = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(prefix=".partial-", suffix=".json", dir=folder)
    try:
        with os.fdopen(handle, "w") as f:
            json.dump(doc, f, indent=2, default=str)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise
