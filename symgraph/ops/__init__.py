"""The op registry: every primitive declared once with all of its rules.

`OPS` maps each op name to its `Op` record (`symgraph.ops.core`). The rule
modules (`custom`, `eig`, `elementwise`, `fourier`, `linalg`, `remat`, `scan`, `special`, `spectral`, `structural`) register
their primitives when they are imported. Their rules are written with
`symgraph.lax`, which binds ops through this registry, so this package does
not import them (that would be a cycle): `symgraph/__init__.py` does, first,
and every `import symgraph.x` runs it.
"""

from .core import KINDS, OPS, Op, get, register

__all__ = ["OPS", "Op", "KINDS", "get", "register"]
