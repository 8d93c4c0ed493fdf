"""fp8_attention: Forgets the 1/sqrt(D) factor of the scores."""
from _attention import run


def custom_kernel(data):
    return run(data, bug="no_softmax_scale")
