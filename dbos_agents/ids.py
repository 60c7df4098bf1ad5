"""Deterministic identifiers: recovery and deduplication key on them, so they never change."""

from __future__ import annotations

import hashlib
import uuid

WORKFLOW_NAME = "dbos_agents.session.v4"
"""What new runs start: the model turn, the server tools and the run's end (with the run's
outcome event) replay from our own rows, not DBOS checkpoints (``runtime.execution``)."""
WORKFLOW_NAME_V3 = "dbos_agents.session.v3"
WORKFLOW_NAME_V2 = "dbos_agents.session.v2"
WORKFLOW_NAME_V1 = "dbos_agents.session.v1"
"""v1 to v3 stay registered, so runs started before an upgrade recover on their own step
sequence."""
INBOX_TOPIC = "dbos_agents.inbox"
"""Where a persistent session's workflow waits for its next user message."""
START_CHANNEL = "dbos_agents_starts"
"""The NOTIFY channel on which a start transaction announces an enqueued run."""


def run_event_key(run_seq: int) -> str:
    """The workflow event each run publishes its outcome under."""
    return f"run:{run_seq}"


def new_session_id() -> str:
    return f"ses_{uuid.uuid4().hex}"


def run_workflow_id(session_id: str, run_seq: int) -> str:
    """The first run of a session is the workflow named by the session id itself."""
    return session_id if run_seq == 1 else f"{session_id}::run::{run_seq}"


def idempotency_key(session_id: str, tool_call_id: str) -> str:
    """Stable per (session, tool call); short and opaque enough for any provider's limits."""
    digest = hashlib.sha256(f"{session_id}\x00{tool_call_id}".encode()).hexdigest()
    return f"dbosag_{digest[:40]}"
