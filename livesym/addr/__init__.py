"""The address model: maps, load segments, base addresses and conversions."""
