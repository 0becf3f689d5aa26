"""The environment variables through which `compare --jobs` tells each run it starts how it
shares the machine, declared once: the local executor (drivers/executors/local.py) sets them, the run reads
them. Kept free of torch, since the run reads the threads before torch starts."""

THREADS = "FINEPRUNE_THREADS"  # this run's share of the cores (drivers/executors/child.py sets torch's threads)
CONCURRENCY = "FINEPRUNE_CONCURRENCY"  # runs at once with this one (the machine signature records it)
