"""fp8_attention: Its causal mask also hides the diagonal (j >= i instead of j > i)."""
from _attention import run


def custom_kernel(data):
    return run(data, bug="diagonal_hidden")
