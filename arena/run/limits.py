"""How long one request to the worker may take, and the other limits of a run's cases (arena/run/evaluator.py,
arena/run/evaluation.py): fitted to each case unless --timeout says otherwise, with allowances for a build on a
first call and for the Blackwell emulation.
"""
from __future__ import annotations

from dataclasses import dataclass

from arena.taskdef.nested import tensors_in

WALL_CALLS = 5            # sync-to-sync calls per case, to compare with event time (side-stream check)


AUTO_FLOOR_S = 30.0       # the least a request gets under the default timeout
# and per MiB of one call's inputs, per call, before any call answered. "emulated": --emulate-blackwell, where
# the tcgen05 work runs in software (9 s for 2304x4608x7168's 50 MiB alone on an H200, ten times that with
# 15 evaluations sharing the GPU; a 32 s limit cut four public kernels that pass).
AUTO_S_PER_MIB = {"cpu": 2.0, "cuda": 0.05, "emulated": 10.0}
AUTO_SEEN_FACTOR = 20     # once a call of the case answered: this many times its time per call
BUILD_ALLOWANCE_S = 300.0   # a run's first request, where a submission that builds lazily compiles
EMULATED_BUILD_ALLOWANCE_S = 900.0     # the same under --emulate-blackwell: two ptxas passes and the rewrite,
                                       # often beside other builds (novus677's dual GEMM passed 300 s with 58)


def auto_timeout(device: str, input_bytes: int, calls: int, seen_per_call_s: float | None,
                 builds: bool = False) -> float:
    """The default limit for one request to the worker, fitted to the case: a floor, plus (before a call of
    the case answered) an allowance per MiB of its inputs on this device, or (after) AUTO_SEEN_FACTOR times
    the slowest time per call seen in the case; plus a build's allowance where one may happen."""
    if seen_per_call_s is not None:
        fitted = AUTO_SEEN_FACTOR * seen_per_call_s * calls
    else:
        fitted = AUTO_S_PER_MIB.get(device, AUTO_S_PER_MIB["cpu"]) * input_bytes / 2**20 * calls
    allowance = EMULATED_BUILD_ALLOWANCE_S if device == "emulated" else BUILD_ALLOWANCE_S
    return round(AUTO_FLOOR_S + fitted + (allowance if builds else 0.0), 1)


@dataclass
class Limits:
    case_timeout: float | None = None   # s per request to the worker; None: auto_timeout fits each request
    max_runs: int = 200             # timed calls per benchmark case
    max_wall: float = 10.0          # s of timing per benchmark case
    check_every: bool = False       # check every timed output (leaderboard), not one per batch
    method: str = "competition"     # "competition": calls_per_sample inputs back to back per sample; "per-call"
    calls_per_sample: int = 1       # the competition's number for the task (task.yml competition_timing)
    wall_calls: int = WALL_CALLS    # sync-to-sync calls per case (--max-runs caps them too)
    diagnose_all: bool = False      # every failing case diagnosed in full (else one per pattern of wrong elements)
    strict: bool = False            # refuse an output dtype or strided layout that the competition accepts
    emulated: bool = False          # --emulate-blackwell: tcgen05 work runs in software, under its own timeouts


def data_bytes(data) -> int:
    return sum(t.untyped_storage().nbytes() for _, t in tensors_in(data))
