"""Stage 2: the runs grouped into rows (one study per report), each row's numbers, paired differences, times and reach."""
