"""The training engine, in the order a run uses it: setup/ (the config tree) -> inputs/ (the
data) -> training/ (the parts built, the synchronous loop, each epoch's end, checkpoints) ->
records/ (the run folder, written atomically). It knows nothing of the CLI."""
