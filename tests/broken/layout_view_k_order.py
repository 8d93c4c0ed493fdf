"""The permuted scale view put back with its two K axes in the wrong order (position before K tile)."""
from _view_kernel import run


def custom_kernel(data):
    return run(data, order=(2, 1, 0, 3, 4, 5))
