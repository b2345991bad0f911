"""Command handlers, imported only when their command runs (so `eigenjury batch` never
loads scipy)."""
