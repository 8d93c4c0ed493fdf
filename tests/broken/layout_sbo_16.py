"""The scale copy reads each 512-byte scale atom's 8-row groups 16 bytes apart instead of 128, as a tcgen05.cp
32x128b source descriptor with SBO = 16 does: row 8·i+j of every 32-row group gets row i+j's scale."""
from _kernel import run


def custom_kernel(data):
    return run(data, bug="sbo_16")
