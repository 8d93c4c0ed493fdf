"""K tile index and position-in-group of the scale swapped."""
from _kernel import run


def custom_kernel(data):
    return run(data, bug='kgroup_swapped')
