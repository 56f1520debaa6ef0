"""Capture files: the versioned format, its writer and its reader."""
