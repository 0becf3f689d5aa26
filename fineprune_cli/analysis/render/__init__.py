"""Stage 4: the report written: its verdict, tables, plots and index.md."""
