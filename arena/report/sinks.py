"""Where a run's results go (eval.py builds the list, arena/run/evaluation.py feeds it): the terminal or the
competition's POPCORN pipe, the JSON file, the HTML report and plots. Each sink takes the same typed RunOutcome
after every case (what finished is kept if the run is stopped or killed) and once when the run ends; a sink that
cannot write says so in one line on stderr and the others go on.
"""
from __future__ import annotations

import sys
from typing import Protocol

from arena.report.results import RunOutcome


class Sink(Protocol):
    def case_finished(self, outcome: RunOutcome) -> None:
        """After each case (outcome.info is None: the run goes on)."""

    def run_finished(self, outcome: RunOutcome) -> bool:
        """Once at the end; False when something could not be written (the run then fails)."""


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class JsonFile:
    """--json PATH: rewritten whole after every case, then with the run's system object."""

    def __init__(self, path: str):
        self.path = path

    def _write(self, outcome: RunOutcome) -> str | None:
        from arena.report import terminal
        try:
            terminal.write_json(self.path, outcome.mode, outcome.task, outcome.submission, outcome.results,
                                outcome.info, outcome.reports if outcome.info else None, outcome.planned)
        except OSError as error:
            return error.strerror or str(error)
        return None

    def case_finished(self, outcome: RunOutcome) -> None:
        problem = self._write(outcome)
        if problem:
            _say(f"warning: cannot write {self.path}: {problem}")

    def run_finished(self, outcome: RunOutcome) -> bool:
        problem = self._write(outcome)
        if problem:
            _say(f"error: cannot write the JSON file {self.path}: {problem}")
        return problem is None


class Terminal:
    """The results table (and diagnosis, probes, integrity) on stdout."""

    def __init__(self, console):
        self.console = console

    def case_finished(self, outcome: RunOutcome) -> None:
        pass                                # the progress line says each case as it ends

    def run_finished(self, outcome: RunOutcome) -> bool:
        from arena.report import terminal
        terminal.render(self.console, outcome.mode, outcome.results, outcome.info, outcome.reports)
        return True


class Popcorn:
    """The competition's result pipe (POPCORN_FD): its key lines, and the integrity lines on stderr so that the
    pipe holds only what the runner reads."""

    def __init__(self, fd: int, static: list):
        self.fd, self.static = fd, static

    def case_finished(self, outcome: RunOutcome) -> None:
        pass                                # the runner reads the pipe once, whole

    def run_finished(self, outcome: RunOutcome) -> bool:
        from arena.report import terminal
        info = outcome.info
        terminal.write_popcorn(self.fd, terminal.popcorn_lines(outcome.mode, outcome.results, outcome.reports,
                                                               not info.stopped))
        terminal.echo_integrity(outcome.results, self.static, info.integrity, info.notices)
        return True


class Pictures:
    """--report PATH (one HTML page) and --plots DIR (a picture per wrong output and timed case)."""

    def __init__(self, report_path: str | None, plots_dir: str | None):
        self.report_path, self.plots_dir = report_path, plots_dir

    def case_finished(self, outcome: RunOutcome) -> None:
        pass                                # drawn once, from every case

    def run_finished(self, outcome: RunOutcome) -> bool:
        from arena.report.html_report import write_pictures
        written, said = write_pictures(outcome.mode, outcome.task, outcome.submission, outcome.results,
                                       outcome.info, self.report_path, self.plots_dir)
        for line in said:
            _say(line)
        return written


def choose_sinks(popcorn_fd: str | None, static: list, json_path: str | None, report_path: str | None,
                 plots_dir: str | None, console=None) -> list:
    """Where a run's results go: the POPCORN pipe when the runner gave one, else the terminal (`console`); then
    --json, then --report and --plots."""
    chosen = [Popcorn(int(popcorn_fd), static) if popcorn_fd is not None else Terminal(console)]
    if json_path:
        chosen.append(JsonFile(json_path))
    if report_path or plots_dir:
        chosen.append(Pictures(report_path, plots_dir))
    return chosen
