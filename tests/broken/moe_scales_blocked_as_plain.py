"""nvfp4_moe: Reads the blocked weight scales as if they were plain row-major: no scale-factor remap."""
from _moe import run


def custom_kernel(data):
    return run(data, bug="scales_blocked_as_plain")
