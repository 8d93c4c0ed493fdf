"""Helpers with the names competition files import from `utils` (set_seed, verbose_allclose, ...)."""
import os
import random

import numpy as np
import torch

from arena.taskdef.checking import make_match_reference, match_reference, verbose_allclose, verbose_allequal  # noqa: F401
from arena.clock.timing import clear_l2_cache  # noqa: F401  (flush sized from the GPU's real L2)


def set_seed(seed=42):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def get_device(use_cuda: bool = True) -> torch.device:
    if use_cuda and torch.cuda.is_available():
        return torch.device("cuda")
    return torch.device("cpu")


def clear_l2_cache_large():
    """Same effect as the competition's 62.5 GiB flush, at a size that fits any GPU."""
    clear_l2_cache()


class DeterministicContext:
    """Deterministic algorithms and no TF32 inside the block; previous settings restored after."""

    def __enter__(self):
        self._saved = (os.environ.get("CUBLAS_WORKSPACE_CONFIG"), torch.backends.cudnn.allow_tf32,
                       torch.backends.cudnn.deterministic, torch.are_deterministic_algorithms_enabled())
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.deterministic = True
        torch.use_deterministic_algorithms(True)
        return self

    def __exit__(self, *exc):
        workspace, tf32, deterministic, algorithms = self._saved
        if workspace is None:
            os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
        else:
            os.environ["CUBLAS_WORKSPACE_CONFIG"] = workspace
        torch.backends.cudnn.allow_tf32 = tf32
        torch.backends.cudnn.deterministic = deterministic
        torch.use_deterministic_algorithms(algorithms)
