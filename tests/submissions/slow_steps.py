import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "submissions"))
from torch_reference import custom_kernel as correct  # noqa: E402


def custom_kernel(data):
    time.sleep(2.5)      # a slow but correct kernel: long enough for a progress line and a signal mid-run
    return correct(data)
