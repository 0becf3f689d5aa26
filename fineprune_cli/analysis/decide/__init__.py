"""Stage 3: the judging plan and its statistics, one decision per policy, planned looks, and the advice beside each decision."""
