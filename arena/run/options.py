"""What one evaluation was asked to do, as one typed object: eval.py (the command line) builds it once and
arena/run/evaluation.py, arena/run/evaluator.py read it. Only the standard library: it exists before torch is imported.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from arena.submission_file import SubmissionFile


@dataclass(frozen=True)
class RunOptions:
    """One run: the mode, the cases, the limits and timing, the sandbox, where results go, the emulation."""
    mode: str                                   # test, benchmark, leaderboard, profile or diagnose
    submission: SubmissionFile                  # the file, read once (its path is absolute)
    cases: tuple = ()                           # ((index in the case list, specs.Case), ...) to run, in order
    # limits
    timeout: float | None = None                # s per request to the worker; None: fitted to each case
    max_runs: int | None = None                 # timed calls per case (None: the mode's default)
    max_time: float | None = None               # s of timing per case (None: the mode's default)
    keep_going: bool = False                    # after a hang, run the remaining cases anyway
    first_failure: bool = False                 # stop after the first failing case (diagnose's search)
    diagnose_all: bool = False                  # diagnose every failing case in full, not only the first of a kind
    strict: bool = False                        # refuse an output dtype or strided layout the competition accepts
    # timing
    timing_method: str | None = None            # "competition" or "per-call"; None: the device's default
    # sandbox
    sandboxed: bool = True                      # False: --no-sandbox (the worker runs unjailed, never ranked)
    # outputs
    popcorn_fd: str | None = None               # the competition's result pipe, when the runner gave one
    figures: bool = False                       # keep pictures of wrong outputs and timed samples (--report/--plots)
    quiet: bool = False                         # no progress on stderr
    sinks: tuple = field(default=(), compare=False)     # arena/report/sinks.py: each gets the outcome after each case
    # emulation
    emulate_blackwell: bool = False             # sm_100a build, tcgen05 in software on a Hopper GPU

    @property
    def ranked(self) -> bool:
        return self.mode == "leaderboard"
