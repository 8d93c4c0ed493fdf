"""Plain sfa/sfb memory read with blocked-layout offsets."""
from _kernel import run


def custom_kernel(data):
    return run(data, bug='plain_as_blocked')
