"""Stage 5 (after `analysis.study`): the report written: its verdict, tables, plots, summary.csv and index.md."""
