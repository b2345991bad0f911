"""Adapters to other tools: Inspect AI, Harbor."""
