"""``python -m undertale_duck``: the same command line as ``undertale-duck``."""

from .cli import entry

entry()
