"""nvfp4_moe: Keeps the intermediate in fp32, never requantized to NVFP4."""
from _moe import run


def custom_kernel(data):
    return run(data, bug="requant_skipped")
