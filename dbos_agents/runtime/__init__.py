"""The worker side: DBOS workflow, steps, ledger writes and the ``AgentRuntime`` facade."""

from .runtime import AgentRuntime, SessionHandle

__all__ = ["AgentRuntime", "SessionHandle"]
