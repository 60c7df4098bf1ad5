"""Writes made from inside the session workflow.

The run's bookkeeping (begin, write #1, write #2, finish) goes through DBOS datasource
transactions: the rows and the step checkpoint commit together, so a replay never writes
twice and a crash never leaves half a turn. ``mark_dispatched`` is deliberately *not* a
checkpointed step: it commits before the handler runs, and a re-executed tool step reads it
back to learn that an earlier attempt may already have caused the side effect.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypedDict, TypeVar

import sqlalchemy as sa
from dbos import DBOS, AsyncSQLAlchemyDatasource

from ..ids import run_workflow_id
from ..messages import Message, Usage
from ..outcome import RunSpec
from ..results import ToolResult
from . import drain

S = "dbos_agents"
P = ParamSpec("P")
R = TypeVar("R")


def _gated(fn: Callable[P, Coroutine[Any, Any, R]]) -> Callable[P, Coroutine[Any, Any, R]]:
    """Refuse to start the write during a drain (see ``drain``)."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        async with drain.step():
            return await fn(*args, **kwargs)

    return wrapper


class WaitSpec(TypedDict):
    """A client-tool or approval call to register before waiting on it."""

    tool_call_id: str
    kind: str
    tool: str
    arguments: str
    timeout_sec: float
    output_schema: dict[str, Any] | None


class LedgerCall(TypedDict):
    tool_call_id: str
    tool: str
    arguments: str
    idempotency_key: str
    safe_to_retry: bool


class Ledger:
    """The workflow's writes, bound to one datasource (one per worker process)."""

    def __init__(self, ds: AsyncSQLAlchemyDatasource) -> None:
        self.ds = ds
        tx = ds.transaction
        self.begin_run = tx(name="dbos_agents.begin_run.v1", isolation_level="READ COMMITTED")(
            _gated(self._begin_run)
        )
        self.record_turn = tx(name="dbos_agents.record_turn.v1", isolation_level="READ COMMITTED")(
            _gated(self._record_turn)
        )
        self.record_results = tx(
            name="dbos_agents.record_results.v1", isolation_level="READ COMMITTED"
        )(_gated(self._record_results))
        self.finish_run = tx(name="dbos_agents.finish_run.v1", isolation_level="READ COMMITTED")(
            _gated(self._finish_run)
        )
        self.register_waits = tx(
            name="dbos_agents.register_waits.v1", isolation_level="READ COMMITTED"
        )(_gated(self._register_waits))
        self.close_inbox = tx(name="dbos_agents.close_inbox.v1", isolation_level="READ COMMITTED")(
            _gated(self._close_inbox)
        )
        self.settle_timeout = tx(
            name="dbos_agents.settle_timeout.v1", isolation_level="READ COMMITTED"
        )(_gated(self._settle_timeout))

    async def _exec(self, sql: str, params: dict[str, Any] | None = None) -> sa.Result[Any]:
        return await self.ds.sql_session().execute(sa.text(sql), params or {})

    async def _next_seq(self, session_id: str) -> int:
        r = await self._exec(
            f"SELECT coalesce(max(seq), 0) + 1 FROM {S}.messages WHERE session_id = :s",
            {"s": session_id},
        )
        return int(r.scalar_one())

    async def _insert_message(self, spec: RunSpec, seq: int, msg: Message) -> None:
        await self._exec(
            f"INSERT INTO {S}.messages (session_id, seq, run_seq, role, content, tool_calls,"
            " tool_call_id, name, user_id, tenant_id) VALUES (:s, :seq, :run, :role, :content,"
            " CAST(:calls AS jsonb), :tcid, :name, :u, :t)",
            {
                "s": spec["session_id"],
                "seq": seq,
                "run": spec["run_seq"],
                "role": msg.role,
                "content": msg.content,
                "calls": json.dumps([c.model_dump(mode="json") for c in msg.tool_calls]),
                "tcid": msg.tool_call_id,
                "name": msg.name,
                "u": spec["user_id"],
                "t": spec["tenant_id"],
            },
        )

    async def _begin_run(self, spec: RunSpec) -> list[dict[str, Any]]:
        """Create or reopen the session, append the user message, return the transcript."""
        workflow_id = DBOS.workflow_id or run_workflow_id(spec["session_id"], spec["run_seq"])
        await self._exec(
            f"INSERT INTO {S}.sessions (id, root_session_id, parent_session_id, agent, status,"
            " user_id, tenant_id, run_seq, workflow_id) VALUES (:id, :root, :parent, :agent,"
            " 'running', :u, :t, :run, :wf) ON CONFLICT (id) DO UPDATE SET status = 'running',"
            " run_seq = excluded.run_seq, workflow_id = excluded.workflow_id, error = NULL,"
            " final_output = NULL, updated_at = now()",
            {
                "id": spec["session_id"],
                "root": spec["root_session_id"],
                "parent": spec["parent_session_id"],
                "agent": spec["agent"],
                "u": spec["user_id"],
                "t": spec["tenant_id"],
                "run": spec["run_seq"],
                "wf": workflow_id,
            },
        )
        await self._exec(
            f"SELECT 1 FROM {S}.sessions WHERE id = :s FOR UPDATE", {"s": spec["session_id"]}
        )
        await self._close_dangling_calls(spec)
        await self._deliver_late_notices(spec)
        seq = await self._next_seq(spec["session_id"])
        await self._insert_message(spec, seq, Message(role="user", content=spec["message"]))
        rows = await self._exec(
            f"SELECT role, content, tool_calls, tool_call_id, name FROM {S}.messages"
            " WHERE session_id = :s ORDER BY seq",
            {"s": spec["session_id"]},
        )
        return [
            Message(
                role=r.role,
                content=r.content,
                tool_calls=r.tool_calls or [],
                tool_call_id=r.tool_call_id,
                name=r.name,
            ).model_dump(mode="json")
            for r in rows
        ]

    async def _record_turn(
        self,
        spec: RunSpec,
        turn: int,
        assistant: dict[str, Any],
        calls: list[LedgerCall],
        usage: dict[str, Any],
        model: str | None,
    ) -> None:
        """Write #1: the assistant message, one ledger row per call, usage and totals."""
        sid = spec["session_id"]
        await self._exec(f"SELECT 1 FROM {S}.sessions WHERE id = :s FOR UPDATE", {"s": sid})
        seq = await self._next_seq(sid)
        await self._insert_message(spec, seq, Message.model_validate(assistant))
        for c in calls:
            await self._exec(
                f"INSERT INTO {S}.tool_calls (session_id, tool_call_id, run_seq, turn, tool,"
                " arguments, idempotency_key, safe_to_retry, status) VALUES (:s, :id, :run,"
                " :turn, :tool, :args, :key, :safe, 'requested')",
                {
                    "s": sid,
                    "id": c["tool_call_id"],
                    "run": spec["run_seq"],
                    "turn": turn,
                    "tool": c["tool"],
                    "args": c["arguments"],
                    "key": c["idempotency_key"],
                    "safe": c["safe_to_retry"],
                },
            )
        u = Usage.model_validate(usage)
        await self._exec(
            f"INSERT INTO {S}.usage (session_id, run_seq, turn, model, input_tokens,"
            " output_tokens, cost_usd, tenant_id) VALUES (:s, :run, :turn, :model, :i, :o, :c, :t)",
            {
                "s": sid,
                "run": spec["run_seq"],
                "turn": turn,
                "model": model,
                "i": u.input_tokens,
                "o": u.output_tokens,
                "c": u.cost_usd,
                "t": spec["tenant_id"],
            },
        )
        await self._exec(
            f"UPDATE {S}.sessions SET turns = turns + 1, input_tokens = input_tokens + :i,"
            " output_tokens = output_tokens + :o, cost_usd = cost_usd + :c, updated_at = now()"
            " WHERE id = :s",
            {"s": sid, "i": u.input_tokens, "o": u.output_tokens, "c": u.cost_usd},
        )

    async def _record_results(
        self, spec: RunSpec, results: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """Write #2: one tool message per call, ledger rows and pending rows settled.

        Returns the late-answer notices delivered with it, for the next model turn."""
        sid = spec["session_id"]
        await self._exec(f"SELECT 1 FROM {S}.sessions WHERE id = :s FOR UPDATE", {"s": sid})
        seq = await self._next_seq(sid)
        for offset, raw in enumerate(results):
            res = ToolResult.model_validate(raw)
            msg = Message(
                role="tool", content=res.content(), tool_call_id=res.tool_call_id, name=res.tool
            )
            await self._insert_message(spec, seq + offset, msg)
            await self._exec(
                f"UPDATE {S}.tool_calls SET status = :st, result = CAST(:res AS jsonb),"
                " error_kind = :kind, completed_at = now() WHERE session_id = :s"
                " AND tool_call_id = :id",
                {
                    "st": "completed" if res.ok else "failed",
                    "res": json.dumps(raw),
                    "kind": res.error.kind if res.error else None,
                    "s": sid,
                    "id": res.tool_call_id,
                },
            )
            await self._exec(
                f"UPDATE {S}.pending_calls SET status = 'resolved', resolved_at = now()"
                " WHERE root_session_id = :r AND tool_call_id = :id"
                " AND status IN ('waiting', 'submitted')",
                {"r": spec["root_session_id"], "id": res.tool_call_id},
            )
        await self._exec(f"UPDATE {S}.sessions SET updated_at = now() WHERE id = :s", {"s": sid})
        return [m.model_dump(mode="json") for m in await self._deliver_late_notices(spec)]

    async def _finish_run(
        self,
        spec: RunSpec,
        status: str,
        output: str | None,
        error: str | None,
        open_inbox: bool = False,
    ) -> None:
        """The run's outcome on the session row; ``open_inbox`` when a persistent session's
        workflow now waits for the next message."""
        await self._exec(
            f"UPDATE {S}.sessions SET status = :st, final_output = :out, error = :err,"
            " inbox_open = :inbox, updated_at = now() WHERE id = :s AND status <> 'interrupted'",
            {
                "st": status,
                "out": output,
                "err": error,
                "inbox": open_inbox,
                "s": spec["session_id"],
            },
        )

    async def _close_inbox(self, session_id: str, run_seq: int) -> bool:
        """At the idle TTL: close the inbox unless a message was sent meanwhile (the sender
        bumped ``run_seq`` under the same row lock); True when the workflow may end."""
        r = await self._exec(
            f"UPDATE {S}.sessions SET inbox_open = false, updated_at = now() WHERE id = :s"
            " AND run_seq = :r RETURNING id",
            {"s": session_id, "r": run_seq},
        )
        return r.first() is not None

    async def _register_waits(
        self, spec: RunSpec, owner_workflow_id: str, waits: list[WaitSpec]
    ) -> dict[str, float]:
        """Register pending rows (ownership on the root session); returns absolute deadlines
        as epoch seconds, fixed here once and replayed from the checkpoint afterwards."""
        deadlines: dict[str, float] = {}
        for w in waits:
            r = await self._exec(
                f"INSERT INTO {S}.pending_calls (root_session_id, tool_call_id, owner_session_id,"
                " owner_workflow_id, kind, tool, arguments, deadline, output_schema, status,"
                " user_id, tenant_id) VALUES (:root, :id, :owner, :wf, :kind, :tool, :args,"
                " now() + make_interval(secs => :timeout), CAST(:schema AS jsonb), 'waiting',"
                " :u, :t) RETURNING extract(epoch FROM deadline)",
                {
                    "root": spec["root_session_id"],
                    "id": w["tool_call_id"],
                    "owner": spec["session_id"],
                    "wf": owner_workflow_id,
                    "kind": w["kind"],
                    "tool": w["tool"],
                    "args": w["arguments"],
                    "timeout": w["timeout_sec"],
                    "schema": json.dumps(w["output_schema"]),
                    "u": spec["user_id"],
                    "t": spec["tenant_id"],
                },
            )
            deadlines[w["tool_call_id"]] = float(r.scalar_one())
        return deadlines

    async def _settle_timeout(self, root_session_id: str, tool_call_id: str) -> str:
        """At the deadline: mark the row timed out unless a submit or an interrupt won the
        race; returns the status the row is left in."""
        r = await self._exec(
            f"UPDATE {S}.pending_calls SET status = CASE WHEN status = 'waiting'"
            " THEN 'timed_out' ELSE status END, resolved_at = CASE WHEN status = 'waiting'"
            " THEN now() ELSE resolved_at END WHERE root_session_id = :r"
            " AND tool_call_id = :id RETURNING status",
            {"r": root_session_id, "id": tool_call_id},
        )
        return str(r.scalar_one())

    async def _close_dangling_calls(self, spec: RunSpec) -> None:
        """Calls left without a result by an interrupted run get one, so the transcript
        stays well-formed (every tool call answered) before the next user message."""
        rows = await self._exec(
            f"SELECT tool_call_id, tool, status FROM {S}.tool_calls WHERE session_id = :s"
            " AND status IN ('requested', 'dispatched') ORDER BY turn, tool_call_id",
            {"s": spec["session_id"]},
        )
        dangling = rows.all()
        if not dangling:
            return
        results = []
        for row in dangling:
            detail = (
                " It may or may not have taken effect."
                if row.status == "dispatched"
                else " It did not run."
            )
            results.append(
                ToolResult.failure(
                    row.tool_call_id,
                    row.tool,
                    "interrupted",
                    f"The session was interrupted before this call finished.{detail}",
                ).model_dump(mode="json")
            )
        await self._record_results(spec, results)

    async def _deliver_late_notices(self, spec: RunSpec) -> list[Message]:
        """One notice per late answer, the first time the owning session runs a turn after it."""
        rows = (
            await self._exec(
                f"UPDATE {S}.pending_calls SET late_noticed = true WHERE owner_session_id = :s"
                " AND late_submission IS NOT NULL AND NOT late_noticed"
                " RETURNING tool_call_id, tool, late_submission",
                {"s": spec["session_id"]},
            )
        ).all()
        notices = []
        seq = await self._next_seq(spec["session_id"])
        for offset, row in enumerate(sorted(rows, key=lambda r: r.tool_call_id)):
            msg = Message(
                role="system",
                content=(
                    f"Late answer: the result of {row.tool} (call {row.tool_call_id}) arrived "
                    "after that call had timed out, so it was not used. It was: "
                    + json.dumps(row.late_submission, sort_keys=True)
                ),
            )
            await self._insert_message(spec, seq + offset, msg)
            notices.append(msg)
        return notices

    async def mark_dispatched(self, session_id: str, tool_call_id: str) -> tuple[str, int]:
        """Commit ``dispatched`` before the handler runs; returns (previous status, attempts)."""
        async with self.ds.engine.begin() as conn:
            row = (
                await conn.execute(
                    sa.text(
                        f"SELECT status FROM {S}.tool_calls WHERE session_id = :s"
                        " AND tool_call_id = :id FOR UPDATE"
                    ),
                    {"s": session_id, "id": tool_call_id},
                )
            ).first()
            if row is None:
                raise RuntimeError(f"no ledger row for tool call {tool_call_id!r}")
            attempts = (
                await conn.execute(
                    sa.text(
                        f"UPDATE {S}.tool_calls SET status = 'dispatched', attempts = attempts + 1,"
                        " dispatched_at = now() WHERE session_id = :s AND tool_call_id = :id"
                        " RETURNING attempts"
                    ),
                    {"s": session_id, "id": tool_call_id},
                )
            ).scalar_one()
        return str(row.status), int(attempts)
