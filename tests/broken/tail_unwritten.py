"""The grid covers N rounded down to 256: the last partial N tile is never written."""
from _kernel import run


def custom_kernel(data):
    return run(data, bug='tail_unwritten')
