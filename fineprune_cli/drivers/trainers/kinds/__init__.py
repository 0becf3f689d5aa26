"""The trainers, one module each, found by `trainers.registry` on its first lookup."""
