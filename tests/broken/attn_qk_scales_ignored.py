"""fp8_attention: Uses the FP8 values of Q and K without their scales (the scales never loaded)."""
from _attention import run


def custom_kernel(data):
    return run(data, bug="qk_scales_ignored")
