"""nvfp4_moe: The exact answer off by a uniform 1 %."""
from _moe import run


def custom_kernel(data):
    return run(data, bug="nudged")
