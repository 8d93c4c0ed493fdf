"""The cases `eval.py diagnose` probes when none is chosen (a spec file or --only chooses): the first case of the
set that fails under `test` (one case that cannot show the bug would say all is well); if every case passes,
the task's small probe case (nvfp4_gemm) or the first case with every switch on (a causal attention case).
One line on stderr says which and why."""
from __future__ import annotations

import sys
from dataclasses import replace

from arena.diagnose import DEFAULT_PROBE_CASE
from arena.diagnose.choice import choose_case
from arena.report.progress import Progress
from arena.run.evaluation import run_mode
from arena.run.options import RunOptions
from arena.run.plan import PlanError
from arena.taskdef.specs import Case, format_spec


def diagnose_cases(task, options: RunOptions, case_set: str) -> list:
    """[(index, Case)]: the one case to probe, from `options.cases` (the task's `case_set`)."""
    indexed = list(options.cases)
    progress = Progress(quiet=options.quiet)
    progress.announce(f"diagnose: running test on the {len(indexed)} {case_set} cases to find the first that fails")
    outcome = run_mode(task, replace(options, mode="test", quiet=True, first_failure=True, popcorn_fd=None,
                                     figures=False, sinks=()))
    results, info = outcome.results, outcome.info
    progress.close()
    if info.stopped:
        raise PlanError(f"{info.stopped} while looking for a failing case", 128 + info.signal)
    failing = next((r for r in results if not r.passed), None)
    if failing is not None:
        print(f"diagnose: case {failing.index} of {case_set} fails under test ({failing.error[:160]}): probing it",
              file=sys.stderr)
        return [(i, c) for i, c in indexed if i == failing.index]
    if task.name == "nvfp4_gemm":
        case = Case(args=dict(DEFAULT_PROBE_CASE), spec=format_spec(DEFAULT_PROBE_CASE))
        print(f"diagnose: all {len(results)} {case_set} cases pass under test: probing the small probe case "
              f"({case.spec})", file=sys.stderr)
        return [(0, case)]
    at, why = choose_case([c.args for _, c in indexed])     # the case with every switch on (causal attention)
    print(f"diagnose: all {len(results)} {case_set} cases pass under test: probing case {indexed[at][0]} "
          f"({why.split(': ', 1)[1]})", file=sys.stderr)
    return indexed[at:at + 1]
