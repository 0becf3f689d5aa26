"""Where `compare` runs its tasks: the contract, the registry, one module per executor, and the child entry point."""
