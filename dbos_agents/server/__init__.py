"""The HTTP API of dbos-agents: ``create_app(settings) -> FastAPI`` and ``serve``.

Thin routes over ``AgentClient`` (no DBOS launch in the server process), session-bound HMAC
tokens and an ``authenticate`` hook (``dbos_agents.server.auth``), body limits, server-sent
events of a session's progress, Prometheus metrics, and one error mapping.
"""

from .app import create_app, serve
from .auth import Authenticate, Operation, Principal, SessionTokens
from .settings import ServerSettings

__all__ = [
    "Authenticate",
    "Operation",
    "Principal",
    "ServerSettings",
    "SessionTokens",
    "create_app",
    "serve",
]
