"""fp8_attention: clamps its output to +-0.125 in the epilogue (values stuck at a bound)."""
from _attention import run


def custom_kernel(data):
    return run(data, bug="out_saturated")
