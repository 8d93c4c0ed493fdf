"""nvfp4_moe: Scale-factor remap: reads scale row r + 1 for weight row r."""
from _moe import run


def custom_kernel(data):
    return run(data, bug="sf_row_off_by_one")
