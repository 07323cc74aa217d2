"""The experiments' own libraries (matplotlib, scikit-learn, trueskill) are the optional extra
``experiments``: each is imported where an experiment first needs it, inside
:func:`experiments_extra`, so a missing one is a clear error that says what to install, not an
ImportError's traceback."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager

INSTALL = "pip install 'bottown[experiments]' (or: uv sync --extra experiments)"


class MissingExtra(RuntimeError):
    """A library of the ``experiments`` extra is not installed; the message says what to do."""


@contextmanager
def experiments_extra() -> Iterator[None]:
    """Imports of the experiments' libraries: a missing one raises :class:`MissingExtra`."""
    try:
        yield
    except ImportError as error:
        package = (error.name or "a library").split(".")[0]
        raise MissingExtra(
            f"the experiments need {package!r}, which is not installed: {INSTALL}"
        ) from None


def require(*modules: str) -> None:
    """Fail now, clearly, when one of ``modules`` is missing: for a command that needs it later,
    where the error would reach no one (a page's request handler)."""
    with experiments_extra():
        for module in modules:
            importlib.import_module(module)
