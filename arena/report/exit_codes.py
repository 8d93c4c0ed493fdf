"""The evaluator's exit codes, one table for eval.py, the run's plan and the batch (README, "Exit codes").
The competition's runner reads 0, 112 and 113; 114 is this evaluator's own. Standard library only: eval.py
imports it before its re-exec."""

EXIT_OK = 0             # every case passed
EXIT_USAGE = 2          # the command line (click's own code for a usage error)
EXIT_FAILED = 112       # a case failed, or a requested output file could not be written
EXIT_SPEC = 113         # a bad spec file or task
EXIT_NOT_RUN = 114      # nothing failed, but some cases were not judged: they need a GPU this machine lacks, or the
                        # Blackwell emulation cannot judge them
