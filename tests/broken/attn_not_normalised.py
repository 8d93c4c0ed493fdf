"""fp8_attention: Never divides by the softmax's row sum."""
from _attention import run


def custom_kernel(data):
    return run(data, bug="not_normalised")
