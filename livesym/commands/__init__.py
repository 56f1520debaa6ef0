"""One module per CLI command; each exposes run(args) -> int."""
