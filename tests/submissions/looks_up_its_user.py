"""Looks its user up at import, as torch.compile's and Triton's cache folders do (getpass.getuser(), through
pwd.getpwuid): a public CuTe DSL group GEMM failed at import in the jail with "getpwuid(): uid not found"."""
import getpass
import importlib.util
import os

USER = getpass.getuser()

_spec = importlib.util.spec_from_file_location(
    "torch_reference", os.path.join(os.path.dirname(__file__), "..", "..", "submissions", "torch_reference.py"))
_ref = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_ref)


def custom_kernel(data):
    return _ref.custom_kernel(data)
