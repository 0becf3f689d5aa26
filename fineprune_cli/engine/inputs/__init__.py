"""The data: datasets loaded, streamed or synthetic, their identity and shape, and the device-resident copy."""
