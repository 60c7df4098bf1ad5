"""DBOS's ``send`` as SQL that a caller's own statement can end with (checked by
``tests/integration/test_client_tools.py`` against the row ``DBOSClient.send_in_transaction``
writes).

A submit marks its wait submitted and sends the delivery; through ``send_in_transaction``
that is a transaction of five round trips (BEGIN, the update, DBOS's insert compiled anew,
COMMIT, after the read). As one statement, a data-modifying CTE whose insert takes its
destination from the update's row, it is one round trip and atomic on its own: the message
exists exactly when the wait was marked.

Private names used: ``DBOSClient._sys_db`` (``schema``, ``serializer``, ``tables``,
``_key_column``), ``dbos._serialization.serialize_value`` and the layout of DBOS's
``notifications`` table (``message_uuid`` = idempotency key + ``::`` + destination, as
``SystemDatabase._send_bulk_txn`` builds it; its insert trigger sends the NOTIFY).
"""

from __future__ import annotations

from typing import Any

from dbos import DBOSClient

from .internals import quoted


def one_statement_possible(client: DBOSClient) -> bool:
    """False on a sharded system database, whose rows carry a shard key DBOS fills in."""
    sys_db = client._sys_db
    return sys_db._key_column(sys_db.tables.notifications) is None


def insert_from(client: DBOSClient, source: str, destination: str) -> str:
    """SQL inserting one message per row of ``source`` (a CTE's name) to the workflow in its
    column ``destination``, as ``send`` with an idempotency key does; ``RETURNING 1`` per
    message written (none when the key was used already). Parameters: ``message_params``."""
    schema = quoted(str(client._sys_db.schema))
    return (
        f"INSERT INTO {schema}.notifications"
        " (destination_uuid, topic, message, message_uuid, serialization)"
        f" SELECT {destination}, :n_topic, :n_message, :n_key || '::' || {destination},"
        f" :n_serialization FROM {source}"
        " ON CONFLICT (message_uuid) DO NOTHING RETURNING 1"
    )


def message_params(client: DBOSClient, message: Any, topic: str, key: str) -> dict[str, Any]:
    """The message serialized as ``send`` serializes it (DBOS's default format)."""
    from dbos._serialization import serialize_value

    value, serialization = serialize_value(message, None, client._sys_db.serializer)
    return {"n_topic": topic, "n_message": value, "n_key": key, "n_serialization": serialization}
