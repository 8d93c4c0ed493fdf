"""The stride between 128-row blocks of the blocked scales computed from the scale count per row (K/16) where
the number of K tiles (K/64) belongs: row block 0 is right, every later block reads other tiles or past the
buffer."""
from _kernel import run


def custom_kernel(data):
    return run(data, bug='rowblock_stride_scales')
