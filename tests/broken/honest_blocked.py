"""A correct kernel-shaped submission (scales read from the blocked memory): must pass."""
from _kernel import run


def custom_kernel(data):
    return run(data, bug=None)
