"""The loading core: shards, windows, reading, cache, dataset (no torch glue, validation or CLI)."""
