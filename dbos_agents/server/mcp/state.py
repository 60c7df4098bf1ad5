"""What a call's ``requestState`` carries, and the key that seals it.

An ``input_required`` result hands the MCP client a state to echo on its retry: the
session, the run it waits for, and the waits it asked about (by tool call id, with how
each answer is read). Nothing else survives between the rounds, and nothing lives in the
server's memory: the retry may reach any ``serve`` process. The SDK's
``RequestStateBoundary`` seals it (AES-256-GCM, bound to the tool name and arguments, an
audience and an expiry) and refuses a state it did not mint; the key is derived from
``ServerSettings.secret``, so every process that shares the secret reads every state.

A state is a bearer capability for its session, as a session token is: a retry that the
hook does not vouch for acts on that session alone (``access.py``).
"""

from __future__ import annotations

import hashlib
from typing import Literal

from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from pydantic import BaseModel, ConfigDict, ValidationError

from ...errors import ConfigurationError, InvalidRequestError
from ..settings import MIN_SECRET_CHARS, ServerSettings

AUDIENCE = "dbos-agents/agents-as-tools"
"""The boundary's audience claim: a state minted by another service that shares the secret
(the MCP client side of ``dbos_agents.mcp``, say) is refused here."""

_KEY_LABEL = b"dbos-agents mcp request state\x00"


class Asked(BaseModel):
    """A wait the client was asked to answer, under the key of its input request."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    call: str
    """The wait's tool call id (submitted to the root session)."""
    kind: str
    """``client``, ``approval`` (or a kind added later: answered like a client tool)."""
    wrapped: bool = False
    """The form's one ``result`` field holds the result as JSON text (``forms.py``)."""


class CallState(BaseModel):
    """The plaintext of a ``requestState``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    v: Literal[1] = 1
    session_id: str
    """The root session the call started or continued."""
    run_seq: int
    """The run the call waits for."""
    asked: dict[str, Asked] = {}
    """Input request key -> the wait it asks about; empty: "still running, call again"."""

    def dump(self) -> str:
        return self.model_dump_json()

    @classmethod
    def load(cls, plaintext: str) -> CallState:
        """The state a retry echoed (unsealed by the boundary, so minted by a server of
        this fleet); a shape this release does not read is ``InvalidRequestError``."""
        try:
            return cls.model_validate_json(plaintext)
        except ValidationError:
            raise InvalidRequestError("requestState of an unknown shape; call again") from None


def state_key(secret: str) -> bytes:
    """The sealing key of every ``serve`` process with this token secret (the SDK stretches
    it again with HKDF): a key of its own, never the token key itself."""
    return hashlib.sha256(_KEY_LABEL + secret.encode()).digest()


def boundary(settings: ServerSettings) -> RequestStateBoundary:
    """The SDK's sealing middleware under the key derived from ``settings.secret``."""
    secret = settings.secret.get_secret_value() if settings.secret is not None else ""
    if len(secret) < MIN_SECRET_CHARS:
        raise ConfigurationError(
            "serving agents as MCP tools needs a token secret of at least"
            f" {MIN_SECRET_CHARS} characters (DBOS_AGENTS_SERVER_SECRET): it seals the"
            " requestState handed to MCP clients, the same key in every server process"
        )
    security = RequestStateSecurity(
        keys=[state_key(secret)],
        ttl=settings.mcp_state_ttl_sec,
        # A retry is authorized by the hook or by the state itself (access.py), not by the
        # SDK's OAuth principal, which this server does not use.
        bind_principal=None,
        audience=AUDIENCE,
    )
    return RequestStateBoundary(security, default_audience=AUDIENCE)
