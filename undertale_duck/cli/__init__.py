"""The ``undertale-duck`` command line: commands, output writers, the shell and rendering."""

from .app import entry, main

__all__ = ["entry", "main"]
