"""Symbolization: from an address in a file or a process to a symbol, with reasons."""
