"""The authors' selection functions, transcribed for fidelity tests (never imported by the package)."""
