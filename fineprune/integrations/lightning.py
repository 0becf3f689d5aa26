"""Lightning's `PruningCallback` (needs the extra: `pip install 'fineprune[lightning]'`)."""

from fineprune_cli.integrations.lightning import PruningCallback

__all__ = ["PruningCallback"]
