"""Outputs: JSON records and terminal tables."""
