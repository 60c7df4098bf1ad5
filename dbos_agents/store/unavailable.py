"""Database errors become ``DatabaseUnavailableError`` at the client boundary.

A connection refused, a server that went away mid-query, a pool that cannot connect: the
driver (psycopg) and SQLAlchemy each raise their own classes, which callers should not need
to know. ``AgentClient`` (and so ``AsyncAgentClient``, the CLI and the HTTP server) wraps
every public method in ``translated``; errors of our own tree pass through unchanged, and
the original error stays attached as ``__cause__``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Concatenate, ParamSpec, Protocol, TypeVar

import psycopg
import sqlalchemy as sa

from ..errors import DatabaseUnavailableError
from .db import describe

DRIVER_ERRORS: tuple[type[Exception], ...] = (
    sa.exc.OperationalError,
    sa.exc.InterfaceError,
    psycopg.OperationalError,
    psycopg.InterfaceError,
)
"""What "the database does not answer" looks like from SQLAlchemy and psycopg."""


def is_unavailable(exc: BaseException) -> bool:
    if isinstance(exc, DRIVER_ERRORS):
        return True
    return isinstance(exc, sa.exc.DBAPIError) and exc.connection_invalidated


def reason(exc: BaseException) -> str:
    """The driver's own last line (``connection refused``, ``server closed the connection``)."""
    orig = exc.orig if isinstance(exc, sa.exc.DBAPIError) and exc.orig is not None else exc
    lines = str(orig).strip().splitlines()
    return lines[-1].strip() if lines else type(orig).__name__


@contextmanager
def translate(url: str) -> Iterator[None]:
    """Re-raise a driver error from the block as ``DatabaseUnavailableError`` naming the host."""
    try:
        yield
    except Exception as exc:
        if not is_unavailable(exc):
            raise
        raise DatabaseUnavailableError(
            f"Postgres at {describe(url)} does not answer: {reason(exc)}"
        ) from exc


class HasDatabaseUrl(Protocol):
    @property
    def database_url(self) -> str: ...


C = TypeVar("C", bound=HasDatabaseUrl)
P = ParamSpec("P")
T = TypeVar("T")


def translated(method: Callable[Concatenate[C, P], T]) -> Callable[Concatenate[C, P], T]:
    """A client method whose driver errors surface as ``DatabaseUnavailableError``."""

    @functools.wraps(method)
    def wrapper(self: C, /, *args: P.args, **kwargs: P.kwargs) -> T:
        with translate(self.database_url):
            return method(self, *args, **kwargs)

    return wrapper
