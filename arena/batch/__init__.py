"""`eval.py batch`: what one evaluation of a batch is and how it runs (jobs.py), and the Ray driver that fans
the evaluations out over GPUs and nodes (ray_driver.py). Ray is imported only by the driver, when it starts."""
