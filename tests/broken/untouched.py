"""Returns c without writing it."""
from _kernel import run


def custom_kernel(data):
    return run(data, bug='untouched')
