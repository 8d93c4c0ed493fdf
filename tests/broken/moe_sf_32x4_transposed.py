"""nvfp4_moe: Scale-factor remap: each 128x4 scale tile read as plain row-major (the 32x4 interleave ignored)."""
from _moe import run


def custom_kernel(data):
    return run(data, bug="sf_32x4_transposed")
