"""An honest group GEMM that reads each group's blocked scales from memory as a kernel does."""
from _group import run


def custom_kernel(data):
    return run(data)
