"""nvfp4_moe: Requantizes the intermediate with e2m1 rounding toward zero instead of to nearest."""
from _moe import run


def custom_kernel(data):
    return run(data, bug="requant_truncated")
