"""Correct except one element: the evaluator must catch a single wrong value."""
import importlib.util, os

_spec = importlib.util.spec_from_file_location(
    "torch_reference", os.path.join(os.path.dirname(__file__), "..", "..", "submissions", "torch_reference.py"))
_ref = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_ref)


def custom_kernel(data):
    c = _ref.custom_kernel(data)
    c[1, 2, 0] += 64
    return c
