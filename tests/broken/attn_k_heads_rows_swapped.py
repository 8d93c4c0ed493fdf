"""fp8_attention: Reads K with the head and row strides exchanged (a wrong leading dimension)."""
from _attention import run


def custom_kernel(data):
    return run(data, bug="k_heads_rows_swapped")
