"""The submission file as the parent reads it: once per run, before the worker exists (eval.py, arena/run/plan.py).
Everything the parent learns from the file (the jail's home, the build hints, the static checks, which task it
names) comes from this one read, so every part of the run sees the same bytes. Standard library only."""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass


@dataclass(frozen=True)
class SubmissionFile:
    path: str           # absolute
    text: str           # the bytes as UTF-8, undecodable ones replaced
    sha256: str         # of the bytes, hex

    @property
    def name(self) -> str:
        return os.path.basename(self.path)

    @classmethod
    def read(cls, path: str) -> "SubmissionFile":
        """OSError when the file cannot be read."""
        with open(path, "rb") as f:
            data = f.read()
        return cls(os.path.abspath(path), data.decode("utf-8", errors="replace"), hashlib.sha256(data).hexdigest())
