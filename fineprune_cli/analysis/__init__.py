"""Reading finished run folders back and judging them, in five stages, each importing only from
the ones before it: read/ (the run folders, their checks and plans) -> group/ (rows of runs, each
row's numbers and paired differences) -> decide/ (the judging plan, its statistics, one decision
per policy and the advice beside it) -> study (one study per report: the stages put together) ->
render/ (verdict, tables, plots, summary.csv, index.md)."""
