"""A streamed reply ends fenced on its writer: the turn's record carries at least one piece
(the last, written again: a no-op insert) so Postgres can refuse a stale execution's
record, and a reply whose pieces were refused ends in ``StaleWriter``, not a record.

The announcer here only plays back what the batches did; what Postgres refuses is tested in
tests/integration/test_stream_writes.py and tests/crash/test_stale_writer.py."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from dbos_agents.live import deltas
from dbos_agents.live.announce import Announcer
from dbos_agents.loop.respond import TurnStream, _streamed
from dbos_agents.models import ModelRequest, ScriptedModel
from dbos_agents.outcome import RunSpec
from dbos_agents.store.fence import StaleWriter, Writer

SPEC = cast(RunSpec, {"session_id": "s", "root_session_id": "s", "run_seq": 1})
WRITER = Writer(workflow_id="wf", token="tok", system_schema='"dbos"')


class Flushed:
    """Every piece was written by a batch (``settle`` has none left), or refused."""

    interval = 0.005

    def __init__(self, refused: bool = False) -> None:
        self.rows: list[deltas.Delta] = []
        self._refused = refused

    def append(self, session_id: str, rows: list[deltas.Delta]) -> None:
        self.rows.extend(rows)

    async def written(self, session_id: str) -> None:
        return None

    async def settle(self, session_id: str) -> list[deltas.Delta]:
        return []

    def refused(self, writer: Writer | None) -> bool:
        return self._refused and writer is not None

    def take_staged(self, session_id: str) -> bool:
        return False


def _reply(announcer: Flushed, writer: Writer | None) -> Any:
    stream = TurnStream(SPEC, 1, cast(Announcer, cast(Any, announcer)), [], writer)
    model = ScriptedModel(respond=lambda req: "Hello, world", chunk_chars=4)
    req = ModelRequest(agent="a", instructions="", messages=[], tools=[])
    return asyncio.run(_streamed(model, req, stream))


def test_a_flushed_reply_hands_its_record_its_last_piece_to_be_fenced() -> None:
    a = Flushed()
    reply = _reply(a, WRITER)
    assert reply.response.text == "Hello, world"
    assert reply.rows == [a.rows[-1]] and reply.rows[0].writer == WRITER


def test_without_a_writer_nothing_is_written_again() -> None:
    assert _reply(Flushed(), None).rows == []


def test_a_reply_whose_pieces_were_refused_is_not_recorded() -> None:
    with pytest.raises(StaleWriter):
        _reply(Flushed(refused=True), WRITER)
