"""The variance models, one module each, found by `procedures.VARIANCES` on its first lookup."""
