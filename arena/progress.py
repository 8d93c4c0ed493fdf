"""Live progress on stderr while a run works: the worker's start (where a CUDA extension builds), then each
case's stage (generating, running, checking, diagnosing, timing with runs so far and the running mean ± err),
then a summary. On a terminal it is one live rich line; otherwise plain lines at each change of stage and every
PLAIN_EVERY_S seconds while one stage lasts. Never on stdout or POPCORN_FD; `--quiet` turns it off."""
from __future__ import annotations

import os
import re
import sys
import threading
import time

PLAIN_EVERY_S = float(os.environ.get("ARENA_PROGRESS_EVERY_S", "15"))   # the plain lines' repeat (tests shorten it)


def extensions_built_by(submission_path: str) -> list[str]:
    """The `name=` of each load_inline/load call in the submission's source (what builds when it is imported)."""
    try:
        source = open(submission_path, encoding="utf-8", errors="replace").read()
    except OSError:
        return []
    if "load_inline" not in source and "cpp_extension" not in source:
        return []
    names = list(dict.fromkeys(re.findall(r"""name\s*=\s*["']([A-Za-z0-9_]+)["']""", source)))
    return names[:3] or ["(unnamed)"]


class Progress:
    """What the run is doing now. `quiet` or no stream: every method does nothing."""

    def __init__(self, stream=None, quiet: bool = False, live: bool | None = None):
        self.stream = stream if stream is not None else sys.stderr
        self.quiet = quiet
        self.live = self.stream.isatty() if live is None else live
        self.text, self.started, self.case_started = "", time.perf_counter(), None
        self.stage_started = time.perf_counter()
        self._lock = threading.Lock()
        self._live = None
        self._stop = threading.Event()
        self._ticker = None
        self.done = []          # (index, passed) of finished cases
        self.case_label = ""     # "case 3 (4/10) m: ...", the prefix of every step's line
        self.first_call_note = ""   # said once, at the first call: a lazy load_inline builds then
        if self.live and not quiet:
            # imported now, before the submission is: a module the parent loads later could be one it rewrote
            import rich.console  # noqa: F401
            import rich.live  # noqa: F401
            import rich.text  # noqa: F401

    # ---- the run's phases --------------------------------------------------------------------------

    def starting(self, submission_path: str):
        names = extensions_built_by(submission_path)
        building = f": building CUDA extension {', '.join(names)} (nvcc; cached after the first build)" if names else ""
        # a submission that builds on its first call (a lazy load_inline) builds during case 0's first call
        self.first_call_note = f" (the first call may build {', '.join(names)} first)" if names else ""
        self._stage(f"starting the worker, importing {submission_path.rsplit('/', 1)[-1]}{building}")

    def case(self, index: int, spec: str, total: int, stage: str):
        self.case_label = f"case {index} ({len(self.done) + 1}/{total}) {spec[:60]}"
        self._stage(f"{self.case_label}: {stage}")

    def stage(self, stage: str):
        """A step inside the case: shown live; in plain lines only by the ticker when it lasts."""
        if stage.startswith("running") and self.first_call_note:
            stage, self.first_call_note = stage + self.first_call_note, ""
        self._stage(f"{self.case_label}: {stage}", quiet_change=True)

    def timing(self, runs: int, mean_ns: float | None, err_ns: float | None):
        figure = f", mean {mean_ns / 1e3:.2f} ± {err_ns / 1e3:.2f} µs" if mean_ns is not None and err_ns is not None else ""
        self._stage(f"{self.case_label}: timing, {runs} samples{figure}", keep_clock=True, quiet_change=True)

    def finished(self, index: int, passed: bool, summary: str):
        self.done.append((index, passed))
        self._print(f"case {index}: {'pass' if passed else 'FAIL'}{': ' + summary if summary else ''}")

    def close(self):
        """Stop the live line and print the summary."""
        if self.quiet:
            return
        self._stop.set()
        if self._live is not None:
            self._live.stop()
            self._live = None
        passed = sum(1 for _, ok in self.done if ok)
        if self.done:
            self._write(f"{passed} of {len(self.done)} cases passed in {time.perf_counter() - self.started:.1f} s")

    # ---- output ------------------------------------------------------------------------------------

    def _stage(self, text: str, keep_clock: bool = False, quiet_change: bool = False):
        if self.quiet:
            return
        with self._lock:
            changed = text != self.text
            self.text = text
            if not keep_clock and changed:
                self.stage_started = time.perf_counter()
        if self.live:
            self._ensure_live()
        elif changed and not quiet_change:
            self._write(text)
            self._ensure_ticker()

    def _line(self):
        from rich.text import Text
        with self._lock:
            elapsed = time.perf_counter() - self.stage_started
            return Text.assemble(("⠿ ", "cyan"), self.text, (f"  {elapsed:.0f} s", "dim"))

    def _ensure_live(self):
        if self._live is None:
            from rich.console import Console
            from rich.live import Live

            class Line:                               # re-rendered at every refresh: the clock ticks
                def __rich__(inner):
                    return self._line()
            self._live = Live(Line(), console=Console(file=self.stream), refresh_per_second=4, transient=True)
            self._live.start()

    def _ensure_ticker(self):
        """Plain output: repeat the current stage with its elapsed time while it lasts (a long build or timing)."""
        if self._ticker is not None:
            return

        def tick():
            while not self._stop.wait(PLAIN_EVERY_S):
                with self._lock:
                    text, elapsed = self.text, time.perf_counter() - self.stage_started
                if elapsed >= PLAIN_EVERY_S:
                    self._write(f"{text} ({elapsed:.0f} s)")
        self._ticker = threading.Thread(target=tick, name="arena-progress", daemon=True)
        self._ticker.start()

    def _print(self, text: str):
        if self.quiet:
            return
        if self._live is not None:
            self._live.console.print(text, markup=False, highlight=False)
        else:
            self._write(text)

    def _write(self, text: str):
        try:
            self.stream.write(f"[arena] {text}\n")
            self.stream.flush()
        except (OSError, ValueError):
            pass


class Silent(Progress):
    """No progress at all (library use, tests that call the evaluator directly)."""

    def __init__(self):
        super().__init__(quiet=True)
