"""Blocked scale tile read as plain row-major 128x4 (32-row / 4-group roles swapped)."""
from _kernel import run


def custom_kernel(data):
    return run(data, bug='rows_plain')
