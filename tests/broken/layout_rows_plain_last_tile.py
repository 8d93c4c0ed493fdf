"""Only the last 128-row scale tile read as plain row-major 128x4 (a tail path with its own indexing)."""
from _kernel import run


def custom_kernel(data):
    return run(data, bug='rows_plain_last_tile')
