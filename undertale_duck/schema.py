"""Built-in dataset schemas and the ``Unique`` marker (public home of the validation schemas)."""

from .validation.schemas import *  # noqa: F403
from .validation.schemas import __all__ as __all__
