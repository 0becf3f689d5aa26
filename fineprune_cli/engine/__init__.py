"""The training engine: config, data, trainer, run record, checkpoints and the session
(`fit`) that turns a config into a recorded run. It knows nothing of the CLI."""
