"""One evaluation run in the trusted parent: options.py (what was asked, typed), plan.py (the cases and checks
before a run), evaluation.py (start the worker, run each case, end what was started), evaluator.py (what each mode
does with one case), benchmark.py (a benchmark case's timed windows), limits.py (each request's time limit),
diagnose_cases.py (the case `diagnose` probes when none is chosen)."""
