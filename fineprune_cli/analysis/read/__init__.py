"""Stage 1 of a report: run folders read back (runs, their checks, collapsed runs, the runs left out, the test set's grid, which plan applies to which run)."""
