"""livesym: a live CPU profiler for Linux processes that shows its work."""

__version__ = "0.1.0"
