"""Several processes: the launcher (torchrun) and the parameter-server modes (async, mixed).
Synchronous data-parallel training (DDP) is part of the engine itself."""
