"""fp8_attention: Reads its FP8 decode table before it is complete on every third call (a missing barrier): nondeterministic."""
from _attention import run


def custom_kernel(data):
    return run(data, bug="race")
