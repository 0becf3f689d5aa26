"""Reading finished run folders back and judging them: runs and their grouping into rows
(`runs`, `groups`), the paired differences (`paired`), the judging plan and the decision rule
(`judging`, `plan`, `decision`, `advice`, `sequence`), computed once per report (`study`), and
what renders it (`numbers`, `tables`, `verdict`, `plots`, `index`, `report`)."""
