"""A's fp4 nibbles swapped (high nibble taken as element 0); B correct."""
from _kernel import run


def custom_kernel(data):
    return run(data, bug='nibble_swap_a')
