"""Load the hand-written LLVM IR files shipped with this package (package data) and fill in their placeholders."""

from __future__ import annotations

import string
from importlib import resources

__all__ = ["ll_text"]


def ll_text(filename: str, **placeholders: object) -> str:
    """The text of `codegen/cpu/<filename>` with each `${NAME}` replaced by `placeholders[NAME]`.

    Args:
        filename: a `.ll` file of this package ("pool.ll", "blas_threads.ll").
        **placeholders: the value of every placeholder the file names (str() of it is inserted).

    Raises:
        KeyError: the file names a placeholder that was not given.
        OSError: the file is missing (an install without the package data).
    """
    text = resources.files(__package__).joinpath(filename).read_text(encoding="utf-8")
    return string.Template(text).substitute({k: str(v) for k, v in placeholders.items()})
