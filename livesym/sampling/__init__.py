"""Samplers: interchangeable producers of samples behind one small interface."""
