"""Patch a module when it is first imported, so that a submission that never imports it pays nothing."""
from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from typing import Callable


class PatchOnImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """A meta-path finder that runs patches[name](module) right after module `name` executes."""

    def __init__(self, patches: dict[str, Callable]):
        self.patches, self._loaders = patches, {}

    def find_spec(self, name, path, target=None):
        if name not in self.patches:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return None
        self._loaders[name] = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec):
        return self._loaders[spec.name].create_module(spec)

    def exec_module(self, module):
        self._loaders[module.__name__].exec_module(module)
        self.patches[module.__name__](module)


def install(patches: dict[str, Callable]) -> None:
    """Patch each named module now if it is loaded, else when it is imported."""
    for name, patch in patches.items():
        if name in sys.modules:
            patch(sys.modules[name])
    sys.meta_path.insert(0, PatchOnImport(patches))
