"""Isolation: what keeps a submission from the evaluator, the host and its neighbours. The bubblewrap jail
(bubblewrap.py) and how the worker is started in it (sandbox.py), the one GPU node it gets (gpu_nodes.py), its
locked cores (affinity_lock.py, cpuset.py), and ending what an evaluation started (cleanup.py). Standard library
only: eval.py imports it before torch and before its re-exec."""
