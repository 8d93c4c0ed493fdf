"""Isolation: what keeps a submission from the evaluator, the host and its neighbours. The bubblewrap jail
(bubblewrap.py), how the worker is started in it (jail.py) with its private home (homes.py), the one GPU node it
gets (gpu_nodes.py) and its locked cores (affinity_lock.py, cpuset.py); the evaluator's own defences
(parent_guard.py), the secret seed kept out of /proc (secret_seed.py), ending what an evaluation started
(processes.py), the worker's text made safe (worker_text.py). Standard library only: eval.py imports it before
torch and before its re-exec."""
