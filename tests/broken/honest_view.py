"""The permuted scale view put back correctly: an honest submission."""
from _view_kernel import run


def custom_kernel(data):
    return run(data)
