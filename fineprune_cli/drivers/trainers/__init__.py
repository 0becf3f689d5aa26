"""Who trains a compare's runs: fineprune's own trainer or the user's script (--script), two
implementations of one contract (contract.py), chosen from the config in one place (registry.py)."""
