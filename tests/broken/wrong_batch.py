"""The batch (L) stride forgotten: every batch computes batch 0."""
from _kernel import run


def custom_kernel(data):
    return run(data, bug='wrong_batch')
