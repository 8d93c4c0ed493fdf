"""nvfp4-arena: the evaluator's engine (formats, layouts, running, timing, checking, reporting).

The competition's runner (gpu-mode/kernelbot) writes only the files task.yml's `files:` lists into an empty
folder, each with a flat name (it cannot create folders), and runs `python eval.py MODE SPECFILE` there.
So task.yml ships this package as `arena.py` (this file) and `arena.<module>.py` per module (a subpackage's
modules as `arena.<package>.<module>.py`, its `__init__` included); imported from
such a folder, this file puts `arena/` back together first, and every process then imports it normally.
"""
import os as _os

_FLAT_PREFIX = "arena."


def _rebuild_from_flat_files(folder: str) -> str | None:
    """Make `folder/arena/` hold the flat copies `folder/arena.py` and `folder/arena.<module>.py`; returns
    that package folder, or None when there are no flat copies (a normal checkout)."""
    # arena.<module>.py -> arena/<module>.py; arena.<package>.<module>.py -> arena/<package>/<module>.py
    flat = {name: _os.path.join(*name[len(_FLAT_PREFIX):-len(".py")].split(".")) + ".py"
            for name in _os.listdir(folder)
            if name.startswith(_FLAT_PREFIX) and name.endswith(".py") and name.count(".") >= 2}
    if _os.path.isfile(_os.path.join(folder, "arena.py")):
        flat["arena.py"] = "__init__.py"
    if not flat:
        return None
    package = _os.path.join(folder, "arena")
    _os.makedirs(package, exist_ok=True)
    for name, module in flat.items():
        with open(_os.path.join(folder, name), "rb") as source:
            text = source.read()
        target = _os.path.join(package, module)
        _os.makedirs(_os.path.dirname(target), exist_ok=True)
        if _os.path.isfile(target):
            with open(target, "rb") as current:
                if current.read() == text:
                    continue
        partial = f"{target}.{_os.getpid()}.tmp"       # written whole, then renamed: no half-written module
        with open(partial, "wb") as out:
            out.write(text)
        _os.replace(partial, target)
    return package


if "__path__" not in globals():     # imported as the flat `arena.py`: become the package rebuilt beside it
    __path__ = [_rebuild_from_flat_files(_os.path.dirname(_os.path.abspath(__file__)))]
else:                               # a package already: refresh it if flat copies lie beside it (a rerun)
    try:
        _rebuild_from_flat_files(_os.path.dirname(_os.path.dirname(_os.path.abspath(__file__))))
    except OSError:                 # best effort: a process that may not write there (the worker) uses it as is
        pass
