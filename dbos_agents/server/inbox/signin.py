"""Operator sign-in for the inbox: a signed cookie, and CSRF tokens tied to it.

The cookie (``dbos_agents_inbox``: HttpOnly, SameSite=Strict, Secure over https, path
``/inbox``) is an ``itsdangerous`` timed signature over ``{"n": nonce}`` before sign-in and
``{"n": nonce, "op": "operator:<name>", "t": tenant}`` after. Every POST form carries
``csrf = HMAC(key, nonce)``; a fresh nonce is drawn at sign-in and sign-out, so a token
from before the sign-in (or from another browser) is refused. The key is derived from the
server's ``secret`` and ``operator_token``: rotating either signs every operator out. With
neither (a hook-only setup) it is random per process, so a restart signs operators out.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

from fastapi import Request, Response
from itsdangerous import BadSignature, URLSafeTimedSerializer

from ..settings import ServerSettings

COOKIE = "dbos_agents_inbox"
COOKIE_PATH = "/inbox"
OPERATOR_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")
"""What an operator may call themselves (it lands in ``decided_by``)."""


@dataclass(frozen=True)
class Visitor:
    """Whoever holds a valid cookie: a nonce, and an operator once signed in."""

    nonce: str
    operator: str | None = None
    """``operator:<name>``: recorded as ``decided_by``."""
    tenant_id: str | None = None
    """The tenant whose calls this operator sees; ``None``: every tenant."""


class OperatorSessions:
    """Reads and writes the inbox cookie; makes and checks CSRF tokens."""

    def __init__(self, settings: ServerSettings) -> None:
        material = b"\x00".join(
            s.get_secret_value().encode() if s is not None else b""
            for s in (settings.secret, settings.operator_token)
        )
        if material == b"\x00":
            material = secrets.token_bytes(32)
        self._key = hashlib.sha256(b"dbos-agents operator cookie\x00" + material).digest()
        self._signer = URLSafeTimedSerializer(self._key, salt="dbos-agents.inbox")
        self.ttl_seconds = settings.operator_session_ttl_sec

    def read(self, request: Request) -> Visitor | None:
        raw = request.cookies.get(COOKIE)
        if not raw:
            return None
        try:
            data = self._signer.loads(raw, max_age=self.ttl_seconds)
        except BadSignature:  # also expired (SignatureExpired is a subclass)
            return None
        if not isinstance(data, dict) or not isinstance(data.get("n"), str):
            return None
        op, tenant = data.get("op"), data.get("t")
        return Visitor(
            nonce=data["n"],
            operator=op if isinstance(op, str) else None,
            tenant_id=tenant if isinstance(tenant, str) else None,
        )

    def write(self, request: Request, response: Response, visitor: Visitor) -> None:
        data: dict[str, str | None] = {"n": visitor.nonce}
        if visitor.operator is not None:
            data |= {"op": visitor.operator, "t": visitor.tenant_id}
        response.set_cookie(
            COOKIE,
            self._signer.dumps(data),
            max_age=self.ttl_seconds,
            path=COOKIE_PATH,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )

    @staticmethod
    def fresh(operator: str | None = None, tenant_id: str | None = None) -> Visitor:
        return Visitor(nonce=secrets.token_urlsafe(24), operator=operator, tenant_id=tenant_id)

    def csrf_token(self, visitor: Visitor) -> str:
        return hmac.new(self._key, b"csrf\x00" + visitor.nonce.encode(), hashlib.sha256).hexdigest()

    def csrf_ok(self, visitor: Visitor | None, token: str) -> bool:
        if visitor is None or not token:
            return False
        return hmac.compare_digest(
            self.csrf_token(visitor).encode(), token.encode("utf-8", "replace")
        )

    def token_ok(self, settings: ServerSettings, given: str) -> bool:
        """Whether ``given`` is the configured operator token (constant time)."""
        expected = settings.operator_token
        if expected is None or not given:
            return False
        return hmac.compare_digest(
            hashlib.sha256(expected.get_secret_value().encode()).digest(),
            hashlib.sha256(given.encode("utf-8", "replace")).digest(),
        )
