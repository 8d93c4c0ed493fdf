"""nvfp4_gemv (tasks/nvfp4_gemv): the task's correct submission with every 32nd output row off by 8.
Not a GEMM: the diagnosis must give the anatomy (the stripe) and claim no GEMM bug."""
import importlib.util
import os

_path = os.path.join(os.path.dirname(__file__), "..", "..", "tasks", "nvfp4_gemv", "torch_submission.py")
_spec = importlib.util.spec_from_file_location("gemv_torch_submission", _path)
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)


def custom_kernel(data):
    out = _module.custom_kernel(data)
    out[::32] += 8
    return out
