"""Optional adapters, under the distribution's name: `fineprune.integrations.lightning`."""
