"""Reading finished run folders back and judging them, in the order a report runs:
read/ (the run folders, their checks and plans) -> group/ (rows of runs, one study per report,
each row's numbers and paired differences) -> decide/ (the judging plan, its statistics, one
decision per policy and the advice beside it) -> render/ (verdict, tables, plots, index.md)."""
