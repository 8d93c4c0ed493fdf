"""Right on its first call, then never returns: a run cut by an outer time limit after one finished case."""
import importlib.util
import os
import time

_spec = importlib.util.spec_from_file_location(
    "torch_reference", os.path.join(os.path.dirname(__file__), "..", "..", "submissions", "torch_reference.py"))
_ref = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_ref)
_calls = 0


def custom_kernel(data):
    global _calls
    _calls += 1
    if _calls > 1:
        time.sleep(3600)
    return _ref.custom_kernel(data)
