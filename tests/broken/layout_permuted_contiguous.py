"""sfa_permuted.contiguous() read as the blocked layout."""
from _kernel import run


def custom_kernel(data):
    return run(data, bug='permuted_contiguous')
