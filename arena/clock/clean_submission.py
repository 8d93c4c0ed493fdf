"""The submission a clean calibration worker imports (arena/run/evaluator.py): that worker only ever times empty windows,
so the parent's clock baseline comes from a process the evaluated submission never touched."""


def custom_kernel(data):
    raise RuntimeError("the calibration worker runs no calls of custom_kernel")
