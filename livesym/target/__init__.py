"""The observed process: /proc access and its mappings."""
