"""Row group (r4) and K position (k4) swapped inside each 16-byte scale row."""
from _kernel import run


def custom_kernel(data):
    return run(data, bug='inner_transposed')
