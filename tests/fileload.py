"""A Python file imported as a module for a test: a bench script, a task tool or a submission, none of them part
of a package."""
import importlib.util
import sys


def load_file(path: str, name: str):
    """The module `name` executed from `path`, registered in sys.modules first (a dataclass looks its module up
    there)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
