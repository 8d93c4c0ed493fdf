"""Nibbles swapped in BOTH operands: invisible in a GEMM, must pass."""
from _kernel import run


def custom_kernel(data):
    return run(data, bug='nibble_swap_both')
