"""The run folder: its records and their types, what makes two runs the same, atomic files, the folder lock."""
