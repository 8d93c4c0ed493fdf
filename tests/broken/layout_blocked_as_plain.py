"""Blocked (permuted) memory read with plain row-major offsets."""
from _kernel import run


def custom_kernel(data):
    return run(data, bug='blocked_as_plain')
