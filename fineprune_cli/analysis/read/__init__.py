"""Stage 1 of a report: run folders read back (runs, their checks, collapsed runs, the runs left out, plans and their files)."""
