import os


def custom_kernel(data):
    os.abort()          # like a segfault in a native extension: the process dies without a Python error
