"""The worker's text made safe (arena/worker/client.py, arena/run/evaluator.py, arena/report/): no escape sequences
or control characters for a terminal or a one-line protocol, and at most OUTPUT_CAP bytes of its stdout and
stderr kept per case. Standard library only.
"""
from __future__ import annotations

import os
import re
import threading

OUTPUT_CAP = 64 << 10                      # bytes of the worker's stdout/stderr kept per case

_CONTROL = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b.?|[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def clean_text(text: str, limit: int = 2000) -> str:
    """Worker text made safe for a terminal and a one-line protocol: no escape sequences or control
    characters (newlines and tabs kept), at most `limit` characters."""
    text = _CONTROL.sub("", str(text).replace("\r\n", "\n"))
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more characters cut]"


class OutputTrap:
    """Reads one of the worker's output pipes on a thread, keeping at most OUTPUT_CAP bytes until taken."""

    def __init__(self, pipe):
        self.pipe, self.kept, self.dropped = pipe, bytearray(), 0
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        while True:
            try:
                chunk = os.read(self.pipe.fileno(), 65536)
            except (OSError, ValueError):
                return
            if not chunk:
                return
            with self.lock:
                room = OUTPUT_CAP - len(self.kept)
                self.kept += chunk[:max(room, 0)]
                self.dropped += max(len(chunk) - max(room, 0), 0)

    def take(self) -> str:
        with self.lock:
            text, dropped = bytes(self.kept).decode(errors="replace"), self.dropped
            self.kept, self.dropped = bytearray(), 0
        text = clean_text(text, limit=OUTPUT_CAP)
        return text + (f"\n... [{dropped} more bytes of output dropped]" if dropped else "")
