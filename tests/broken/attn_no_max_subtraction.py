"""fp8_attention: A softmax without the max subtraction: right on small scores, Inf/NaN once exp() overflows."""
from _attention import run


def custom_kernel(data):
    return run(data, bug="no_max_subtraction")
