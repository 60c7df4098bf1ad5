"""Whose sessions a client may act on: a value the client carries, not a second class.

``AgentClient.for_identity(user, tenant)`` and ``for_tenant(tenant)`` return the same
``AgentClient`` class narrowed to a ``Scope``; the admin client (no scope) is for trusted
scripts and the CLI. Every session a scoped client touches is checked against its scope
before anything is read or changed (``AccessDeniedError``), sessions it starts are its
own, and listings are filtered to it. Raw SQL over agent tables goes through an
application role instead (``store/roles.py``), where Postgres enforces the same rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, TypeVar

from .. import storable
from ..errors import AccessDeniedError, InvalidRequestError, SessionNotFoundError


class Owned(Protocol):
    """A read of a session's row that carries its owner (a ``SessionInfo``, a row)."""

    @property
    def user_id(self) -> str | None: ...
    @property
    def tenant_id(self) -> str | None: ...


R = TypeVar("R", bound=Owned)


@dataclass(frozen=True)
class Scope:
    """One user's sessions (of one tenant, when ``tenant_id`` is set), or, with
    ``user_id`` None, every user's sessions of one tenant (an operator's scope)."""

    user_id: str | None
    tenant_id: str | None

    def __post_init__(self) -> None:
        if self.user_id is None and self.tenant_id is None:
            raise InvalidRequestError("a scope names a user, a tenant or both")
        storable.check_optional_id(self.user_id, "user_id")
        storable.check_optional_id(self.tenant_id, "tenant_id")

    def admits(self, user_id: str | None, tenant_id: str | None) -> bool:
        """Whether a session of ``user_id`` and ``tenant_id`` is in this scope (sub-agent
        sessions carry their root's, so the same check covers them)."""
        return (self.user_id is None or user_id == self.user_id) and (
            self.tenant_id is None or tenant_id == self.tenant_id
        )

    def check(self, session_id: str, user_id: str | None, tenant_id: str | None) -> None:
        if not self.admits(user_id, tenant_id):
            raise AccessDeniedError(session_id)

    def narrow(self, user_id: str | None, tenant_id: str | None) -> tuple[str | None, str | None]:
        """Filters or a new session's identity under this scope: what the caller named, or
        the scope's own; naming another identity is refused."""
        if (user_id is not None and self.user_id is not None and user_id != self.user_id) or (
            tenant_id is not None and self.tenant_id is not None and tenant_id != self.tenant_id
        ):
            raise AccessDeniedError(
                None, f"this client is scoped to {self}; it cannot act as another identity"
            )
        return user_id or self.user_id, tenant_id or self.tenant_id


def seen(scope: Scope | None, session_id: str, read: R | None) -> R:
    """A read of the session as a client of ``scope`` may see it (None: there is none)."""
    if read is None:
        raise SessionNotFoundError(session_id)
    if scope is not None:
        scope.check(session_id, read.user_id, read.tenant_id)
    return read
