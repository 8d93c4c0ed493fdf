"""What a run produces, shared by the evaluator (arena/run/evaluator.py), the diagnosis (arena/diagnose/) and the
report (arena/report/terminal.py): one case's result, what the run as a whole saw, and the leaderboard's score."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from arena.clock.timing import Stats


# Errors that say the machine lacks what the case needs (arena/blackwell/missing.py words them), or that the Blackwell
# emulation cannot judge the case (arena/blackwell/runtime.py's `cannot_judge`): the case is not judged here,
# a status of its own, as pytest's skip.
CANNOT_JUDGE = "cannot judge on this GPU"      # the emulation met what it does not model
CANNOT_JUDGE_HERE = "cannot judge here"        # the same, for what this machine lacks besides the GPU
LACKS = ("needs a CUDA GPU", "needs a Blackwell GPU", CANNOT_JUDGE, CANNOT_JUDGE_HERE)
IMPORT_FAILED = "cannot import submission: "


def mark_not_run(result: "CaseResult") -> "CaseResult":
    """Set `not_run` when the case failed only because this machine cannot judge it: it lacks a GPU the case
    needs, or the emulation met what it does not model (at import or in a call)."""
    if not result.passed and result.error.removeprefix(IMPORT_FAILED).startswith(LACKS):
        result.not_run = result.error.removeprefix(IMPORT_FAILED)
    return result


def not_judged_words(reason: str) -> str:
    """How a report shows a case that was not judged: "cannot judge on this GPU: ..." as it is, else
    "not run: needs ..."."""
    return reason if reason.startswith((CANNOT_JUDGE, CANNOT_JUDGE_HERE)) else f"not run: {reason}"


@dataclass
class CaseResult:
    index: int
    spec: str
    passed: bool
    error: str = ""                 # one line: why it failed
    message: str = ""
    details: list = field(default_factory=list)      # mismatch lines, traceback tail
    stats: Stats | None = None
    wall: Stats | None = None                        # sync-to-sync wall-clock per call
    sol_us: float | None = None
    warnings: list = field(default_factory=list)     # integrity flags
    untrusted: str = ""                              # why the timing cannot be honest (benchmark: marked, not failed)
    not_run: str = ""                                # what this machine lacks for the case (a CUDA GPU, a Blackwell
                                                     # GPU): not judged here, neither passed nor wrong
    diagnosis: str = ""                              # why the output is wrong, in plain words (arena/diagnose/)
    evidence: list = field(default_factory=list)     # the lines backing the diagnosis
    output: str = ""                                 # what the submission printed (control characters removed)
    timing: dict = field(default_factory=dict)       # how the figures were taken: method, calls per sample
    prediction: dict = field(default_factory=dict)   # predict mode: the B200 time and its parts (arena/predict/b200.py)
    # For --report / --plots only, never in the JSON: the pictures of a wrong output and the timed samples
    figures: list = field(default_factory=list)      # arena.report.figures.ErrorFigure per batch or wrong group
    samples_ns: list = field(default_factory=list)

    def as_dict(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if k not in ("stats", "wall", "figures", "samples_ns")}
        d["stats"] = self.stats.as_dict() if self.stats else None
        d["wall"] = self.wall.as_dict() if self.wall else None
        return d


@dataclass
class RunInfo:
    """The run as a whole (arena/run/evaluation.py fills it; eval.py adds the static checks' warnings)."""
    machine: dict                                    # report.system_info(): Python, torch, the GPU or None
    wall_s: dict                                     # worker start, each case, total (seconds)
    integrity: dict | None = None                    # the hardening the parent and the worker applied
    notices: list = field(default_factory=list)      # what the worker noticed (one line each)
    refused: str | None = None                       # why the run was refused, if it was
    static_warnings: list = field(default_factory=list)   # static_checks findings, as dicts
    stopped: str = ""                                # why the run ended early ("stopped by SIGTERM"), if it did
    signal: int = 0                                  # the signal that stopped it (0: none)
    not_reached: int = 0                             # cases the run never began because it was stopped
    import_error: str = ""                           # the one line of a submission that did not import

    def system_json(self) -> dict:
        """The JSON's `system` object: the machine and the run's own notes."""
        return {**self.machine, "notices": self.notices, "refused": self.refused, "wall_s": self.wall_s,
                "stopped": self.stopped, "not_reached": self.not_reached}


@dataclass
class RunOutcome:
    """What a run hands to its sinks (arena/report/sinks.py): after every case, with `info` None while the run
    goes on, and once at its end, `info` filled."""
    mode: str
    task: str
    submission: str                                  # the file's path
    planned: int                                     # cases the run set out to do
    results: list[CaseResult] = field(default_factory=list)
    reports: dict[int, list[dict] | str] = field(default_factory=dict)   # diagnose: the case's probes; profile:
                                                                        # its table
    info: RunInfo | None = None

    @property
    def not_run(self) -> int:
        return sum(bool(r.not_run) for r in self.results)

    @property
    def failed(self) -> int:
        return sum(not r.passed for r in self.results) - self.not_run


def _geometric_mean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def geomean_us(results: list[CaseResult]) -> float | None:
    means = [r.stats.mean / 1e3 for r in results if r.passed and r.stats]
    if not means or len(means) != len(results):
        return None
    return _geometric_mean(means)


def predicted_geomean_us(results: list[CaseResult]) -> float | None:
    """predict mode: the geometric mean of the predicted B200 times (None unless every case has one)."""
    times = [r.prediction.get("b200_us") for r in results]
    if not times or any(not t for t in times):
        return None
    return _geometric_mean(times)


@dataclass
class ProbeResult:
    """One probe of `eval.py diagnose` (arena/diagnose/probes.py): did the submission pass it, in a line, and
    the evidence."""
    name: str
    ok: bool
    headline: str
    lines: list = field(default_factory=list)
