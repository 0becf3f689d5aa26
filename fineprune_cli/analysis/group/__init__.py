"""Stage 2: the runs grouped into rows, each row's numbers, paired differences, failures, times, reach and schedule compression."""
