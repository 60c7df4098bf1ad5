"""The worker: ``AgentRuntime`` (launch DBOS, run sessions, start runs, drain), the
long-lived process around it (``process``: ``dbos-agents worker``), and what keeps a fleet
of them healthy (``presence``: heartbeats and adoption; ``parking``; ``starts``)."""

from .handle import SessionHandle
from .process import load_runtime, run_worker, serve_forever
from .runtime import AgentRuntime

__all__ = ["AgentRuntime", "SessionHandle", "load_runtime", "run_worker", "serve_forever"]
