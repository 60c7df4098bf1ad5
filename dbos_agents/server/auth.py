"""Who may call what: HMAC session tokens and the ``authenticate`` hook.

Session tokens
    ``POST /sessions`` answers with a token bound to the new, server-issued session id:
    ``v2.<base64url(session id)>.<expiry>.<born>.<generation>.<base64url(HMAC-SHA256)>``
    (times in unix seconds), signed with ``ServerSettings.secret`` over everything before the
    signature. ``born`` is when the first token of the chain was issued: a refresh keeps it,
    so no chain of refreshes outlives ``token_max_lifetime_sec``. ``generation`` must equal
    the session's ``token_generation``: ``POST /sessions/{id}/revoke-tokens`` bumps it and
    every earlier token stops working (``v1`` tokens, from before both, still verify as
    generation 0). Every
    ``/sessions/{id}/...`` call sends it as ``Authorization: Bearer <token>``. Missing or
    malformed header, bad signature or expired token: 401. A valid token for another
    session: 403. Signatures and session ids are compared with ``hmac.compare_digest``.

The ``authenticate`` hook
    ``authenticate(request, operation, session_id) -> Principal | None`` (sync or async) is
    called first on every API call (``session_id`` is None for ``create_session``;
    submitting a client-tool result is ``submit_result``, approving or denying is
    ``decide_approval``, which a session token alone may not do):

    - return a ``Principal``: the hook vouches for the call; no token is needed. On session
      routes, when the principal has a ``tenant_id`` or ``user_id``, the server also checks
      that the session belongs to it (403 otherwise). On ``create_session`` its
      ``user_id``/``tenant_id`` become the session's (a different value in the body: 403);
      fields it leaves ``None`` may come from the body.
    - return ``None``: no opinion; the session token decides (``create_session`` then needs
      ``allow_unauthenticated=True``, else 401).
    - raise ``fastapi.HTTPException(401 or 403)``: refused, whatever token is sent.

    So a hook can *replace* tokens (return principals everywhere) or *add to* them (return a
    principal for ``create_session`` only, raise when the caller is not logged in, return
    ``None`` elsewhere so the token is still required).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import inspect
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal, TypeAlias, cast

from fastapi import HTTPException, Request

from ..errors import ConfigurationError
from ..imports import import_object

Operation = Literal[
    "create_session",
    "send_message",
    "read_session",
    "read_pending",
    "read_events",
    "submit_result",
    "decide_approval",
    "interrupt",
    "refresh_token",
    "revoke_tokens",
    "list_sessions",
    "operate",
]
"""What a call wants to do; the hook's second argument. ``operate`` is an operator signing
in to the inbox (``session_id`` None): a principal returned for it may answer every call of
its tenant (every tenant's, if its ``tenant_id`` is None); see docs/inbox.md."""


@dataclass(frozen=True)
class Principal:
    """The caller, as an ``authenticate`` hook established it."""

    subject: str
    """Who it is (a user name, a service account); for logs and audit."""
    user_id: str | None = None
    tenant_id: str | None = None


Authenticate: TypeAlias = Callable[
    [Request, Operation, str | None], "Principal | Awaitable[Principal | None] | None"
]
"""``authenticate(request, operation, session_id) -> Principal | None``, sync or async."""

Clock: TypeAlias = Callable[[], float]
"""Seconds since the epoch (``time.time``); injectable for tests."""

TOKEN_VERSION = "v2"


class TokenError(Exception):
    """A bearer token that does not authenticate anybody (401)."""


@dataclass(frozen=True)
class IssuedToken:
    token: str
    expires_at: datetime


@dataclass(frozen=True)
class VerifiedToken:
    session_id: str
    expires: int
    born: int
    """When the chain's first token was issued (unix seconds)."""
    generation: int = 0
    """The session's token generation it was issued under."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class SessionTokens:
    """Issues and verifies session-bound HMAC tokens (see the module doc)."""

    def __init__(
        self,
        secret: str,
        ttl_seconds: int,
        *,
        max_lifetime_seconds: int | None = None,
        clock: Clock = time.time,
    ) -> None:
        self._key = hashlib.sha256(b"dbos-agents session token\x00" + secret.encode()).digest()
        self.ttl_seconds = ttl_seconds
        self.max_lifetime_seconds = max_lifetime_seconds or 24 * ttl_seconds
        self.clock = clock

    def _sign(self, signed_part: str) -> str:
        return _b64(hmac.new(self._key, signed_part.encode("ascii"), hashlib.sha256).digest())

    def issue(
        self, session_id: str, *, born: int | None = None, generation: int = 0
    ) -> IssuedToken:
        """A token for ``session_id``; ``born`` (from the token being refreshed) caps its
        expiry at ``born + max_lifetime_seconds``: raises ``TokenError`` once that passed."""
        now = int(self.clock())
        born = now if born is None else born
        expires = min(now + self.ttl_seconds, born + self.max_lifetime_seconds)
        if expires <= now:
            raise TokenError("token lifetime exhausted: start a new session or sign in again")
        signed_part = f"{TOKEN_VERSION}.{_b64(session_id.encode())}.{expires}.{born}.{generation}"
        return IssuedToken(
            token=f"{signed_part}.{self._sign(signed_part)}",
            expires_at=datetime.fromtimestamp(expires, UTC),
        )

    def verify(self, token: str) -> str:
        """The session id the token is bound to; raises ``TokenError``."""
        return self.verify_full(token).session_id

    def verify_full(self, token: str) -> VerifiedToken:
        """The session id, expiry and birth of a valid token; raises ``TokenError``."""
        parts = token.split(".")
        v2 = len(parts) == 6 and parts[0] == "v2" and parts[3].isdigit() and parts[4].isdigit()
        v1 = len(parts) == 4 and parts[0] == "v1"
        if not (v1 or v2) or not parts[2].isdigit():
            raise TokenError("malformed token")
        signed_part, signature = token.rpartition(".")[0], parts[-1]
        try:
            expected = self._sign(signed_part)
        except UnicodeEncodeError:
            raise TokenError("malformed token") from None
        # Compare the canonical encodings, so no two strings carry the same signature.
        if not hmac.compare_digest(expected.encode(), signature.encode("utf-8", "replace")):
            raise TokenError("bad token signature")
        expires = int(parts[2])
        if expires <= self.clock():
            raise TokenError("token expired")
        born = int(parts[3]) if v2 else expires - self.ttl_seconds
        generation = int(parts[4]) if v2 else 0
        try:
            return VerifiedToken(_unb64(parts[1]).decode(), expires, born, generation)
        except (binascii.Error, UnicodeDecodeError, ValueError):
            raise TokenError("malformed token") from None


@dataclass(frozen=True)
class Access:
    """How a call was let in."""

    via: Literal["hook", "token", "anonymous"]
    principal: Principal | None = None
    token: VerifiedToken | None = None
    """The bearer token that let the call in (``via == "token"``): its expiry, birth and
    generation, verified and checked against the session's current generation."""


def unauthorized(message: str) -> HTTPException:
    return HTTPException(401, message, headers={"WWW-Authenticate": "Bearer"})


QUERY_TOKEN = "access_token"
"""A GET may carry its token as ``?access_token=``: ``EventSource`` cannot send headers."""


def bearer_token(request: Request) -> str:
    header = request.headers.get("authorization")
    if header is None:
        query = request.query_params.get(QUERY_TOKEN) if request.method == "GET" else None
        if query:
            return query
        raise unauthorized("missing Authorization: Bearer <token> header")
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or " " in token:
        raise unauthorized("malformed Authorization header; expected 'Bearer <token>'")
    return token


async def call_hook(
    hook: Authenticate, request: Request, operation: Operation, session_id: str | None
) -> Principal | None:
    result = hook(request, operation, session_id)
    if inspect.isawaitable(result):
        result = await result
    if result is not None and not isinstance(result, Principal):
        raise TypeError(f"authenticate must return a Principal or None, got {result!r}")
    return result


def load_authenticate(spec: str) -> Authenticate:
    """Import ``module:callable`` (e.g. from ``DBOS_AGENTS_SERVER_AUTHENTICATE``)."""
    hook = import_object(spec, "authenticate hook")
    if not callable(hook):
        raise ConfigurationError(f"authenticate hook {spec!r} is not callable")
    return cast(Authenticate, hook)
