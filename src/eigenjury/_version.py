"""The package's version, in a module of its own so records and fits can stamp it
without importing the package face (`eigenjury/__init__.py`)."""

__version__ = "0.3.7"
