"""Writes zeros instead of the result."""
from _kernel import run


def custom_kernel(data):
    return run(data, bug='zeros')
