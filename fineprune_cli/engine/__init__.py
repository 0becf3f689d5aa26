"""The training engine: config, data, trainer, lr schedule, run record, checkpoints, and the
synchronous loop that turns a config into a recorded run (build: its parts; loop: the epochs;
epochend: what each epoch's end records, for the parameter servers' chief too; totals: its
figures; session: starting and resuming it). It knows nothing of the CLI."""
