"""The rules of the game checked: integrity.py (the worker's harness guard and the parent's output audit) and static_checks.py (hints from a submission's text, never blocking)."""
