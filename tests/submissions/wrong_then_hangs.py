"""Wrong on every call of its first case's shape, and never returns on any other shape: a run cut by an outer time
limit after a case that failed."""
import importlib.util
import os
import time

_spec = importlib.util.spec_from_file_location(
    "torch_reference", os.path.join(os.path.dirname(__file__), "..", "..", "submissions", "torch_reference.py"))
_ref = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_ref)
_first_shape = None


def custom_kernel(data):
    global _first_shape
    shape = tuple(data[0].shape)
    if _first_shape is None:
        _first_shape = shape
    if shape != _first_shape:
        time.sleep(3600)
    out = _ref.custom_kernel(data)
    return out + 1
