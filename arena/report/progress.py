"""Live progress on stderr while a run works: the worker's start (where a CUDA extension builds), then each
case's stage (generating, running, checking, diagnosing, timing with runs so far and the running mean ± err),
then a summary. On a terminal it is one live rich line; otherwise (a pipe, a log) plain lines: one for every step
that lasts over PLAIN_AFTER_S, naming it, then one every PLAIN_EVERY_S seconds while it lasts, and one per finished
case. Never on stdout or POPCORN_FD; `--quiet` turns it off."""
from __future__ import annotations

import os
import re
import sys
import threading
import time

PLAIN_EVERY_S = float(os.environ.get("ARENA_PROGRESS_EVERY_S", "15"))   # the plain lines' repeat (tests shorten it)
PLAIN_AFTER_S = 1.0       # a step shorter than this gets no plain line of its own
TICK_S = 0.2              # how often the plain ticker looks


def gpu_present() -> bool:
    """Whether this machine has an NVIDIA GPU device node (checked without importing torch)."""
    return any(os.path.exists(node) for node in ("/dev/nvidiactl", "/dev/nvidia0", "/dev/dxg"))


def jit_kernels_in(source: str) -> list[str]:
    """The CuTe DSL or Triton kernels of a submission's text: they JIT-compile on the first call for each new
    shape."""
    return [label for label, marks in (("CuTe DSL kernels", ("cute.compile", "@cute.jit", "@cute.kernel")),
                                       ("Triton kernels", ("@triton.jit",)))
            if any(mark in source for mark in marks)]


def extensions_built_by(source: str) -> list[str]:
    """What the submission compiles when it is imported or first called: the `name=` of each load_inline/load call,
    and its CuTe DSL or Triton kernels."""
    jit = jit_kernels_in(source)
    if "load_inline" not in source and "cpp_extension" not in source:
        return jit
    names = list(dict.fromkeys(re.findall(r"""name\s*=\s*["']([A-Za-z0-9_]+)["']""", source)))
    return (names[:3] or ["(unnamed)"]) + jit


class Progress:
    """What the run is doing now. `quiet` or no stream: every method does nothing."""

    def __init__(self, stream=None, quiet: bool = False, live: bool | None = None):
        self.stream = stream if stream is not None else sys.stderr
        self.quiet = quiet
        self.live = self.stream.isatty() if live is None else live
        self.text, self.started, self.case_started = "", time.perf_counter(), None
        self.stage_started = time.perf_counter()
        self.step = ""           # the step the text names (timing updates keep it); plain lines follow steps
        self.shown_step, self.shown_at = None, 0.0    # the step last printed in plain mode, and when
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

    def starting(self, submission):
        """`submission`: arena/submission_file.py SubmissionFile."""
        names = extensions_built_by(submission.text) if gpu_present() else []
        building = f": building CUDA extension {', '.join(names)} (nvcc; cached after the first build)" if names else ""
        # a submission that builds on its first call (a lazy load_inline) builds during case 0's first call
        self.first_call_note = f" (the first call may build {', '.join(names)} first)" if names else ""
        self._stage(f"starting the worker, importing {submission.name}{building}")

    def announce(self, text: str):
        """A step outside any case (a build of `eval.py compile`, a batch's phase)."""
        self._stage(text)

    def failed_to_start(self, error: str):
        """The submission did not import: the run's one line about it (no case runs)."""
        self._stage("")
        self._print(f"the submission did not import: {error}")

    def case(self, index: int, spec: str, total: int, stage: str):
        self.case_label = f"case {index} ({len(self.done) + 1}/{total}) {spec[:60]}"
        self._stage(f"{self.case_label}: {stage}")

    def stage(self, stage: str):
        """A step inside the case."""
        if stage.startswith("running") and self.first_call_note:
            stage, self.first_call_note = stage + self.first_call_note, ""
        self._stage(f"{self.case_label}: {stage}")

    def timing(self, runs: int, mean_ns: float | None, err_ns: float | None):
        figure = "" if mean_ns is None else f", mean {mean_ns / 1e3:.2f} µs" if runs < 2 or err_ns is None \
            else f", mean {mean_ns / 1e3:.2f} ± {err_ns / 1e3:.2f} µs"
        self._stage(f"{self.case_label}: timing, {runs} sample{'' if runs == 1 else 's'}{figure}", step=f"{self.case_label}: timing")

    def finished(self, index: int, passed: bool, summary: str, not_run: str = ""):
        self.done.append((index, passed))
        self._stage("")
        status = "pass" if passed else ("cannot judge" if not_run.startswith("cannot judge") else "not run") \
            if not_run else "FAIL"
        self._print(f"case {index}: {status}{': ' + summary if summary else ''}")

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

    def _stage(self, text: str, step: str | None = None):
        """Now doing `text`; `step` names it when the text changes within one step (timing's running count)."""
        if self.quiet:
            return
        step = text if step is None else step
        with self._lock:
            self.text = text
            changed = step != self.step
            if changed:
                self.step, self.stage_started = step, time.perf_counter()
        if self.live:
            if text:
                self._ensure_live()
                if changed:             # drawn now: a step shorter than a refresh period is still seen
                    self._live.refresh()
        else:
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
        """Plain output: a line for each step that lasts over PLAIN_AFTER_S, then one every PLAIN_EVERY_S."""
        if self._ticker is not None:
            return

        def tick():
            while not self._stop.wait(TICK_S):
                self.plain_tick()
        self._ticker = threading.Thread(target=tick, name="arena-progress", daemon=True)
        self._ticker.start()

    def plain_tick(self, now: float | None = None):
        """Print the current step if it is due (the ticker calls this; tests may call it directly)."""
        now = time.perf_counter() if now is None else now
        with self._lock:
            text, step, elapsed = self.text, self.step, now - self.stage_started
            if not text or elapsed < PLAIN_AFTER_S:
                return
            new = step != self.shown_step
            if not new and now - self.shown_at < PLAIN_EVERY_S:
                return
            self.shown_step, self.shown_at = step, now
        self._write(text if new and elapsed < PLAIN_EVERY_S else f"{text} ({elapsed:.0f} s)")

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
