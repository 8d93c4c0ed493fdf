"""Correct, except that the case with n = 512 kills its process: later cases must still run in a new worker."""
import importlib.util
import os

_spec = importlib.util.spec_from_file_location(
    "torch_reference", os.path.join(os.path.dirname(__file__), "..", "..", "submissions", "torch_reference.py"))
_ref = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_ref)


def custom_kernel(data):
    if data[-1].shape[1] == 512:
        os.abort()
    return _ref.custom_kernel(data)
