"""Explaining wrong outputs: why did this case fail, in one or two plain sentences, with the evidence.

Used by the test/benchmark paths (on the parent's own data, after a failed check) and by `python eval.py
diagnose` (which also runs probes). One job per module, imported one way (common <- anatomy <- hypotheses <-
verdict <- probes); rendering lives in arena/report/terminal.py:

- common: tolerances, sizes, the Diagnosis type, formatting helpers.
- anatomy: NaN/Inf and mismatch counts, untouched or all-zero output, a map of the wrong 128x128 tiles.
- hypotheses (nvfp4_gemm contract only): references computed under the classic bugs, on a sample.
- verdict: anatomy + hypotheses -> one or two sentences and advice (`diagnose`).
- groups: group GEMM: which groups are wrong, exchanged groups or operands, irregular-M tails, and each
  wrong group's own verdict.
- scalemap: a measured scale map in words (row r received row f(r)'s scale) with its likely cause.
- races: a second call on identical inputs after a failed check; outputs that differ name a race.
- pattern: the cheap pattern of a wrong output's errors (one full diagnosis per pattern in a run).
- explain: the hook after a failed check (`explain_failure`), one tensor or a list of groups.
- probes: structured inputs through the real worker (`eval.py diagnose`).
"""
from arena.diagnose.common import ATOL, RTOL, Diagnosis, index_pattern
from arena.diagnose.anatomy import Anatomy, anatomy
from arena.diagnose.hypotheses import (LAYOUT_BUGS, Match, gemm_hypotheses, is_gemm_contract, low_precision_check,
                                       misread_scales)
from arena.diagnose.verdict import diagnose
from arena.diagnose.groups import diagnose_groups, is_group_contract
from arena.diagnose.explain import explain_failure
from arena.diagnose.pattern import FailurePattern, failure_pattern
from arena.diagnose.probes import DEFAULT_PROBE_CASE, ProbeFailure, ProbeResult, diagnose_case, run_probes

__all__ = ["ATOL", "RTOL", "Diagnosis", "index_pattern", "Anatomy", "anatomy", "LAYOUT_BUGS", "Match",
           "gemm_hypotheses", "is_gemm_contract", "low_precision_check", "misread_scales", "diagnose",
           "diagnose_groups", "is_group_contract", "explain_failure", "FailurePattern", "failure_pattern", "DEFAULT_PROBE_CASE", "ProbeFailure", "ProbeResult", "diagnose_case", "run_probes"]
