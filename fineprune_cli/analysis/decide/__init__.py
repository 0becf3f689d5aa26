"""Stage 3: the judging plan and its statistics, one decision per policy, the runs left out in them, planned looks, and the advice beside each decision."""
