"""A load_inline extension built at the first call of custom_kernel (as JIT-built CUTLASS and CuTe DSL submissions
do), whose C++ source has a syntax error: the case's error names the file, line and error, as at import."""
from torch.utils.cpp_extension import load_inline

CPP_SRC = r"""
#include <torch/extension.h>
torch::Tensor passthrough(torch::Tensor c) {
    return c
}
"""

_module = None


def custom_kernel(data):
    global _module
    if _module is None:
        _module = load_inline(name="passthrough_at_call_ext", cpp_sources=CPP_SRC, functions=["passthrough"],
                              verbose=False)
    return _module.passthrough(data[-1])
