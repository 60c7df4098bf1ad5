"""The caller's trace context, carried with what a client or a runtime starts and sends: a
run's workflow input and a persistent session's inbox message get the active span's W3C
carrier (``traces.KEY``), so the run's spans are children of the caller's, in the same
trace on every execution (DBOS records both); a submit's message too (``client.submit``).
Nothing is added when no span is active."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from dbos import DBOSClient, EnqueueOptions

from .. import traces
from ..ids import INBOX_TOPIC, WORKFLOW_NAME


def with_context(message: Any) -> Any:
    """``message`` with the caller's carrier, if a span is active and it is a JSON object."""
    if not isinstance(message, dict):
        return message
    carrier = traces.capture()
    return message if carrier is None else {**message, traces.KEY: carrier}


class TracedDBOSClient(DBOSClient):
    """``DBOSClient`` whose session-workflow starts and inbox messages carry the caller's
    trace context (see the module doc)."""

    def enqueue_in_transaction(
        self, conn_or_session: Any, options: EnqueueOptions, *args: Any, **kwargs: Any
    ) -> Any:
        if options.get("workflow_name") == WORKFLOW_NAME and args:
            args = (with_context(args[0]), *args[1:])
        return super().enqueue_in_transaction(conn_or_session, options, *args, **kwargs)

    def send_in_transaction(
        self,
        conn_or_session: sa.Connection | Any,
        destination_id: str,
        message: Any,
        topic: str | None = None,
        idempotency_key: str | None = None,
        **kwargs: Any,
    ) -> None:
        if topic == INBOX_TOPIC:
            message = with_context(message)
        super().send_in_transaction(
            conn_or_session, destination_id, message, topic, idempotency_key, **kwargs
        )
