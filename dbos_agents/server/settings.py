"""Server settings, overridable from the environment (prefix ``DBOS_AGENTS_SERVER_``)."""

from __future__ import annotations

import json
from typing import Annotated

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from ..settings import file_sources

MIN_SECRET_CHARS = 32


class ServerSettings(BaseSettings):
    """Settings of ``dbos-agents serve`` / ``create_app``.

    Secure by default: ``create_app`` refuses to build an app that has neither an
    ``authenticate`` hook nor ``allow_unauthenticated=True``, and binds to loopback.
    """

    model_config = SettingsConfigDict(
        env_prefix="DBOS_AGENTS_SERVER_", extra="ignore", populate_by_name=True
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Arguments, then environment, then the ``[server]`` table of the settings file."""
        return file_sources(settings_cls, init_settings, env_settings, "server")

    database_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices(
            "database_url", "DBOS_AGENTS_SERVER_DATABASE_URL", "DBOS_AGENTS_DATABASE_URL"
        ),
    )
    """Postgres URL; falls back to ``DBOS_AGENTS_DATABASE_URL``."""
    secret: SecretStr | None = None
    """HMAC key of session tokens (at least 32 characters). Without it no tokens are issued;
    then an ``authenticate`` hook or ``allow_unauthenticated`` must authorize every call."""
    token_ttl_sec: int = Field(default=3600, gt=0)
    token_max_lifetime_sec: int = Field(default=24 * 3600, gt=0)
    """No chain of ``POST /sessions/{id}/token`` refreshes outlives this from the first
    token; an open event stream closes when its token expires."""
    """Lifetime of a session token; ``POST /sessions/{id}/token`` issues a fresh one."""
    max_body_bytes: int = Field(default=1 << 20, gt=0)
    """Larger request bodies are refused with 413 before they are read."""
    allow_unauthenticated: bool = False
    """Let anyone create sessions (and, without ``secret``, use them). Logs a WARNING."""
    agents: list[str] | None = None
    """Agents that ``POST /sessions`` may start (others: 404 ``UNKNOWN_AGENT``). None: any
    name is enqueued, and a name no worker knows is only found out by the worker."""
    authenticate: str | None = None
    """``module:callable`` of an ``Authenticate`` hook, loaded when none is passed in code."""
    tokens_may_approve: bool = False
    """Let a session token (or an anonymous caller) approve or deny the session's
    approval-gated calls. Off: only a principal from the authenticate hook may, and the
    hook sees the distinct operation ``decide_approval``."""
    metrics_enabled: bool = True
    """Serve ``GET /metrics`` (no auth: route templates and counts only, never ids)."""
    events_poll_interval_sec: float = Field(default=5.0, gt=0)
    """An event stream's safety net: how often it reads the session again when no change
    was announced (changes wake it at once; a lost notification waits this long)."""
    events_keepalive_sec: float = Field(default=15.0, gt=0)
    """An SSE ping (a comment) is sent this often, so proxies keep the stream open."""
    events_max_stream_sec: float = Field(default=3600.0, gt=0)
    """A following stream closes after this long; clients reconnect with Last-Event-ID."""
    events_send_timeout_sec: float = Field(default=30.0, gt=0)
    """An event stream whose client has not taken a send (an event or a ping) within this
    long is closed, so a stalled reader does not hold the server's resources."""
    inbox: bool = False
    """Serve the operator inbox at ``/inbox`` (docs/inbox.md). Needs ``operator_token`` or
    an authenticate hook that answers the ``operate`` operation."""
    operator_token: SecretStr | None = None
    """The token operators sign in to the inbox with (at least 32 characters)."""
    operator_tenant: str | None = None
    """The tenant whose calls an operator signed in with ``operator_token`` sees and
    answers; ``None``: every tenant's."""
    operator_session_ttl_sec: int = Field(default=8 * 3600, gt=0)
    """An operator stays signed in this long."""
    chat_page: bool = False
    """Serve the example chat page at ``/chat/{agent}`` (docs/ai-sdk.md): it talks to
    ``POST /ai-sdk/{agent}`` with the session token a new chat gets (approvals from it need
    ``tokens_may_approve`` or an authenticate hook that lets the page's caller approve)."""
    cors_origins: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """Origins whose pages may call the API from a browser (CORS), e.g. a chat UI served
    elsewhere; ``DBOS_AGENTS_SERVER_CORS_ORIGINS`` takes a comma-separated list or a JSON
    array. Empty (the default): no CORS headers, only same-origin pages."""
    mcp: bool = False
    """Serve agents as MCP tools at ``mcp_path`` over streamable HTTP (``serve --mcp``;
    docs/mcp-serve.md). Needs the ``mcp`` extra and ``secret``: the key that seals each
    call's ``requestState`` is derived from it, so every server process must share it."""
    mcp_path: str = "/mcp"
    """Where the MCP endpoint is mounted."""
    mcp_agents: Annotated[list[str] | None, NoDecode] = None
    """The agents offered as MCP tools: names, or ``module:attr`` of an ``Agent`` (or a list
    of them), whose description becomes the tool's. None: every agent the workers publish
    (within ``agents`` when that is set). ``DBOS_AGENTS_SERVER_MCP_AGENTS`` takes a
    comma-separated list or a JSON array."""
    mcp_max_wait_sec: float = Field(default=240.0, gt=0, allow_inf_nan=False)
    """How long one MCP ``tools/call`` waits for the run before it answers "still running"
    (an ``input_required`` result holding only the state: the client calls again)."""
    mcp_state_ttl_sec: float = Field(default=24 * 3600.0, gt=0, allow_inf_nan=False)
    """How long a sealed ``requestState`` handed to an MCP client stays valid."""
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    workers: int = Field(default=1, ge=1)
    """Server processes on the port (``serve``; uvicorn's supervisor): each has its own
    event loop and connections, so a second core serves requests too. More than one
    needs the hook named in ``authenticate``, not passed in code."""
    log_level: str = "info"

    @field_validator("cors_origins", "mcp_agents", mode="before")
    @classmethod
    def _split_list(cls, value: object) -> object:
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                return json.loads(text)
            return [o.strip() for o in text.split(",") if o.strip()]
        return value
