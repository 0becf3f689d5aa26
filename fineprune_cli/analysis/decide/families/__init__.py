"""The family procedures, one module each, found by `procedures.FAMILIES` on its first lookup."""
