"""Experiment drivers: many runs from one config (`compare`'s policy matrix, `scale`)."""
