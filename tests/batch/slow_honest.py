"""A correct submission that takes 6 s per call: long enough for a test to lose the process evaluating it."""
import time

from submissions.torch_reference import custom_kernel as honest


def custom_kernel(data):
    time.sleep(6)
    return honest(data)
