"""The op registry: every primitive declared once with all of its rules.

Importing this package registers every primitive in `OPS`.
"""

from . import custom, elementwise, linalg, remat, structural  # noqa: F401  (registration side effects)
from .core import KINDS, OPS, Op, get, register

__all__ = ["OPS", "Op", "KINDS", "get", "register"]
