"""The permuted scale view put back with its row axes in the wrong order (row in group outermost)."""
from _view_kernel import run


def custom_kernel(data):
    return run(data, order=(0, 1, 2, 4, 3, 5))
