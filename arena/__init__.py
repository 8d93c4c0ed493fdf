"""nvfp4-arena: the evaluator's engine (formats, layouts, running, timing, checking, reporting)."""
