"""The A (and SFA) pointer arrays indexed with the next group's index."""
from _group import run


def custom_kernel(data):
    return run(data, bug='wrong_a')
