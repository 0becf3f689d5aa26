"""Adapters to other training frameworks, each behind its optional extra; nothing here is
imported by `fineprune_cli` itself, the engine or the CLI (`fineprune_cli.integrations.lightning`
needs `pip install 'fineprune[lightning]'`)."""
