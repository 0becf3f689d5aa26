"""The executors, one module each with its `Kind`, found by `executors.registry` on its first lookup."""
