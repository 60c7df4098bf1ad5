"""Chat ids of the chat-UI protocols (the AI SDK's chat id, AG-UI's thread id) as sessions.

A chat UI names its conversation with an id it makes up. The session of chat ``c`` of agent
``a`` is ``ses_`` + HMAC-SHA256(key, ``a \\0 c``) (the first 32 hex digits), keyed with the
server's token secret when it has one: a caller cannot guess a session id from a chat id, and
the mapping needs no table. A chat id only *names* the session: who may use it is decided as
on every session route. A new chat is a ``create_session`` (the hook's principal becomes the
session's user and tenant; with a token secret the answer carries a fresh session token), an
existing one needs the hook's say-so or that session's token (another user's chat: 403).
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fastapi import HTTPException, Request

from ..errors import InvalidRequestError, UnknownAgentError
from ..events import Cursor
from ..outcome import SessionInfo
from .auth import Access, Operation
from .context import Seen, ServerContext

if TYPE_CHECKING:
    from ..store.sessions import WithRuns

__all__ = [
    "Chat",
    "RunCursors",
    "chat_session_id",
    "open_chat",
    "require_existing",
    "say",
    "session_of_chat",
]

CHAT_ID = re.compile(r"[A-Za-z0-9_.:\-]{1,128}")
"""What the clients generate (nanoid-like ids, UUIDs), bounded."""

_UNKEYED = b"dbos-agents chat ids"


@dataclass(frozen=True)
class RunCursors:
    """Where a stream of the session's current run, or of its next one, starts."""

    start: Cursor
    """Before the current run's first message: a replay of the whole run (a run with no
    message yet starts at the log's end)."""
    asked: Cursor
    """After the current run's last assistant message (the one whose calls wait): what
    follows an answer, server tools' results of that turn included."""
    following: Cursor
    """Before the next run's first message: a follow-up's stream."""

    @classmethod
    def of(cls, read: WithRuns) -> RunCursors:
        start = Cursor(read.first - 1) if read.first is not None else Cursor(read.last)
        asked = Cursor(read.asked) if read.asked is not None else start
        nxt = read.first_next
        return cls(start, asked, Cursor(nxt - 1) if nxt is not None else Cursor(read.last))


@dataclass(frozen=True)
class Chat:
    """A chat resolved to its session and let in."""

    agent: str
    chat_id: str
    session_id: str
    access: Access
    exists: bool
    """The session has been started (False: ``say`` starts it)."""
    info: SessionInfo | None = None
    """The session as read when the chat was let in (None: not started)."""
    cursors: RunCursors | None = None
    """Where its runs' streams start, read with ``info``."""
    seen: Seen | None = None
    """What ``authorize`` checks, read with ``info`` (other operations reuse it)."""

    def session(self) -> SessionInfo:
        """The started session as read when it was let in (authorized: no second read)."""
        if self.info is None:
            raise HTTPException(404, f"no chat {self.chat_id!r} of agent {self.agent!r}")
        return self.info

    def runs(self) -> RunCursors:
        """Where the started session's streams start, as read when it was let in."""
        if self.cursors is None:
            raise HTTPException(404, f"no chat {self.chat_id!r} of agent {self.agent!r}")
        return self.cursors


def ctx_of(request: Request) -> ServerContext:
    ctx: ServerContext = request.app.state.dbos_agents
    return ctx


def chat_session_id(ctx: ServerContext, agent: str, chat_id: str, *, field: str = "id") -> str:
    """The session id of chat ``chat_id`` of ``agent``; a malformed chat id is refused with
    ``INVALID_REQUEST`` naming ``field`` (where the protocol's body carries it)."""
    if not isinstance(chat_id, str) or CHAT_ID.fullmatch(chat_id) is None:
        raise InvalidRequestError(
            f"{field}: a chat id is 1 to 128 characters of letters, digits and _.:-"
            f" (got {chat_id!r:.80})"
        )
    secret = ctx.settings.secret
    return session_of_chat(
        secret.get_secret_value() if secret is not None else None, agent, chat_id
    )


def session_of_chat(secret: str | None, agent: str, chat_id: str) -> str:
    """The mapping itself (scripts and tests that know the secret can follow a chat)."""
    key = secret.encode() if secret is not None else _UNKEYED
    digest = hmac.new(key, f"{agent}\x00{chat_id}".encode(), hashlib.sha256).hexdigest()
    return "ses_" + digest[:32]


async def open_chat(
    request: Request,
    agent: str,
    chat_id: str,
    *,
    operation: Operation = "send_message",
    field: str = "id",
) -> Chat:
    """Resolve and authorize a chat: an existing chat is checked for ``operation`` (as the
    session routes check it: 401, 403); a chat that does not exist yet for ``create_session``.
    An agent outside ``ServerSettings.agents`` is ``UNKNOWN_AGENT`` (404)."""
    ctx = ctx_of(request)
    allowed = ctx.settings.agents
    if allowed is not None and agent not in allowed:
        raise UnknownAgentError(agent, allowed)
    sid = chat_session_id(ctx, agent, chat_id, field=field)
    # The session, its token generation and its runs' cursors in one read: under load every
    # read of a request waits its turn for the loop's connections.
    read = await ctx.agent_client().session_with_runs(sid)
    if read is None:
        access = await ctx.authorize(request, "create_session", None)
        return Chat(agent, chat_id, sid, access, exists=False)
    seen = Seen(read.info.user_id, read.info.tenant_id, read.token_generation)
    access = await ctx.authorize(request, operation, sid, seen)
    cursors = RunCursors.of(read)
    return Chat(agent, chat_id, sid, access, True, read.info, cursors, seen)


async def say(request: Request, chat: Chat, message: str) -> str | None:
    """Send the user's ``message``: a new chat's first run, or a follow-up (``SESSION_BUSY``
    409 while a run is going). Returns a session token when a new chat was started on a
    server that issues them (the client sends it as ``Authorization: Bearer`` from then on),
    else None."""
    ctx = ctx_of(request)
    if chat.exists:
        await ctx.acting(chat.access).send(chat.session_id, message)
        return None
    p = chat.access.principal
    user_id = p.user_id if p is not None else None
    tenant_id = p.tenant_id if p is not None else None
    await ctx.agent_client().start(
        chat.agent, message, session_id=chat.session_id, user_id=user_id, tenant_id=tenant_id
    )
    if ctx.tokens is None:
        return None
    return ctx.tokens.issue(chat.session_id).token


def require_existing(chat: Chat) -> None:
    """For requests that act on a chat's session (resume a stream, answer a tool): a chat
    that was never started is 404."""
    if not chat.exists:
        raise HTTPException(404, f"no chat {chat.chat_id!r} of agent {chat.agent!r}")
