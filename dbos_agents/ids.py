"""Deterministic identifiers: recovery and deduplication key on them, so they never change."""

from __future__ import annotations

import hashlib
import uuid

WORKFLOW_NAME = "dbos_agents.session.v4"
"""The session workflow's registered name. Recovery finds a run's code by it, so it stays
as long as its DBOS operation sequence does (docs/architecture.md, "Releases")."""
INBOX_TOPIC = "dbos_agents.inbox"
"""Where a persistent session's workflow waits for its next user message."""
START_CHANNEL = "dbos_agents_starts"
"""The NOTIFY channel on which a start transaction announces an enqueued run (the payload:
the run's queue)."""


def agent_queue(queue_name: str, agent: str) -> str:
    """The DBOS queue of ``agent``'s runs: only workers that run the agent listen to it, so
    a run never lands on a worker that lacks its agent (``queue_name`` alone is the queue of
    runs enqueued before per-agent queues, which every worker still drains)."""
    return f"{queue_name}:{agent}"


def new_session_id() -> str:
    return f"ses_{uuid.uuid4().hex}"


def run_workflow_id(session_id: str, run_seq: int) -> str:
    """The first run of a session is the workflow named by the session id itself."""
    return session_id if run_seq == 1 else f"{session_id}::run::{run_seq}"


def idempotency_key(session_id: str, tool_call_id: str) -> str:
    """Stable per (session, tool call); short and opaque enough for any provider's limits."""
    digest = hashlib.sha256(f"{session_id}\x00{tool_call_id}".encode()).hexdigest()
    return f"dbosag_{digest[:40]}"


def child_session_id(parent_workflow_id: str, tool_call_id: str) -> str:
    """A sub-agent call's session (and its first run's workflow): a child of the workflow
    that made the call."""
    return f"{parent_workflow_id}{_SUB}{tool_call_id}"


def root_call(session_id: str) -> str | None:
    """The root's tool call that started sub-agent session ``session_id``, directly or
    through sub-agents of its own; None for a root session."""
    parts = session_id.split(_SUB)
    return parts[1] if len(parts) > 1 else None


_SUB = "::sub::"

DURABLE_WORKFLOW_NAME = "dbos_agents.durable_tool.v1"
"""The registered name of a durable tool's workflow (``@tool(durable=True)``)."""


def durable_workflow_id(parent_workflow_id: str, tool_call_id: str) -> str:
    """A durable call's workflow: a child of the session workflow that made the call."""
    return f"{parent_workflow_id}::tool::{tool_call_id}"


def ask_id(tool_call_id: str, note: int) -> str:
    """The wait a durable tool's ``ctx.ask`` opens with its progress note number ``note``
    (readers find it from the note)."""
    return f"{tool_call_id}.ask{note}"


def asking_call(wait_id: str) -> str:
    """The durable tool call that opened wait ``wait_id`` (``ask_id``'s inverse)."""
    return wait_id.rsplit(".ask", 1)[0]
