"""Procedures above the analysis: training planned looks of seeds until each policy is decided."""
