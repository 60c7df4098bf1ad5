"""What a durable tool's body does through its context (``ToolContext.step`` and friends):
the loop's side of ``tool_context.DurableOps``.

Every operation is numbered in the order the body starts it (the number is taken before
the first ``await``, so ``asyncio.gather`` of steps numbers them in argument order): a
re-executed body finds each step's recorded outcome under the same number, and its
checkpoints and progress notes are written once per number. Step functions run outside
the workflow's DBOS context, so DBOS calls they make do not become operations of the
tool's workflow; ``ask`` waits inside it (a ``recv``, recorded by DBOS).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import time
import typing
import uuid
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from pydantic import TypeAdapter, ValidationError
from sqlalchemy.ext.asyncio import AsyncEngine

from ... import _dbos, ids, storable
from ...agent import Agent
from ...client_tools import ClientTool
from ...delivery import ApprovalDelivery, ErrorDelivery, ResultDelivery
from ...errors import (
    AskTimeoutError,
    NondeterministicToolError,
    NotJSONError,
    StepFailedError,
    StepOutcomeUnknownError,
)
from ...ids import idempotency_key
from ...live import deltas
from ...messages import JSONValue
from ...outcome import RunSpec
from ...store import durable as rows
from ...store import pending, pg
from ...store.retry import fetch_one, retry_transient
from ...tool_context import Decision, FormAsk, StepInfo, _ApprovalAsk
from ...traces import spans
from .. import drain
from ..calls.base import RunInterrupted
from ..calls.waiting import wait_for_submission
from ..context import get_context
from ..crashpoints import crash_point
from .jsonpath import check_json

_current: ContextVar[StepInfo | None] = ContextVar("dbos_agents_inner_step", default=None)
_ADAPTERS: dict[Callable[..., Any], TypeAdapter[Any] | None] = {}


@dataclass(frozen=True)
class Call:
    """The durable call a body serves."""

    spec: RunSpec
    agent: Agent
    tool: str
    tool_call_id: str
    turn: int
    workflow_id: str


class Ops:
    """One execution of a durable tool's body (see the module doc)."""

    def __init__(self, engine: AsyncEngine, call: Call, begun: rows.Begun) -> None:
        self._engine = engine
        self._call = call
        self._recovered = begun.executions > 1
        self._snapshot: JSONValue | None = begun.snapshot
        self._snapshot_no = begun.snapshot_no
        self._steps = 0
        self._checkpoints = 0
        self._notes = 0
        self._writes: list[asyncio.Task[None]] = []

    # --- inner steps ---------------------------------------------------------------------

    async def step(
        self,
        name: str,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        safe_to_retry: bool,
    ) -> Any:
        self._steps += 1
        seq = self._steps
        if not isinstance(name, str) or not name:
            raise TypeError(f"ctx.step: the step's name must be a non-empty str, got {name!r}")
        adapter = _adapter(fn)
        await self.flush()
        c = self._call
        key = idempotency_key(c.spec["session_id"], f"{c.tool_call_id}/step/{seq}")
        stmt = rows.step_stmt(
            c.workflow_id,
            seq,
            c.spec["session_id"],
            c.spec["run_seq"],
            name,
            safe_to_retry,
            uuid.uuid4().hex,
        )
        async with drain.step():  # a drain lets a started step finish, and starts none
            mark = rows.step_mark(await fetch_one(self._engine, stmt, "inner step mark"))
            if not mark.live:
                raise RunInterrupted(c.tool_call_id)
            if not mark.fresh:
                if mark.name is not None and mark.name != name:
                    raise NondeterministicToolError(seq, mark.name, name)
                if mark.status == "completed":
                    return _typed(adapter, mark.output)
                if mark.status == "failed":
                    raise StepFailedError(name, mark.error_type or "Exception", mark.error or "")
                if not safe_to_retry:
                    raise StepOutcomeUnknownError(name, seq, key)
            crash_point("inner_step_marked")
            info = StepInfo(name, seq, key)
            try:
                with spans.step(name):  # a no-op untraced
                    value = await _dbos.outside_workflow(_invoke(fn, args, kwargs, info))
                output = _dump(adapter, value, f"the output of inner step {name!r}")
            except Exception as exc:
                crash_point("inner_step_ran")
                error = exc.detail if isinstance(exc, NotJSONError) else str(exc)
                etype = type(exc).__name__
                await self._write(
                    rows.step_done_stmt(c.workflow_id, seq, None, etype, error), "inner step"
                )
                crash_point("inner_step_recorded")
                raise StepFailedError(name, etype, error) from exc
            crash_point("inner_step_ran")
            await self._write(
                rows.step_done_stmt(c.workflow_id, seq, output, None, None), "inner step"
            )
            crash_point("inner_step_recorded")
            return _typed(adapter, output)

    def current_step(self) -> StepInfo | None:
        return _current.get()

    # --- snapshot and progress -------------------------------------------------------------

    def checkpoint(self, data: JSONValue) -> Awaitable[None]:
        check_json(data, "the checkpoint")
        self._checkpoints += 1
        number = self._checkpoints
        if number <= self._snapshot_no:  # a re-executed body passing an earlier checkpoint
            return _done()
        self._snapshot, self._snapshot_no = data, number
        c = self._call
        stmt = rows.checkpoint_stmt(c.spec["session_id"], c.tool_call_id, number, data)
        return self._later(self._write(stmt, "checkpoint"))

    @property
    def snapshot(self) -> JSONValue | None:
        return self._snapshot

    @property
    def recovered(self) -> bool:
        return self._recovered

    def progress(self, note: str, fraction: float | None) -> Awaitable[None]:
        if not isinstance(note, str):
            raise TypeError(f"ctx.progress: note must be a str, got {type(note).__name__}")
        if fraction is not None and not (
            isinstance(fraction, (int, float)) and 0.0 <= fraction <= 1.0
        ):
            raise ValueError(f"ctx.progress: fraction must be within 0..1, got {fraction!r}")
        self._notes += 1
        c = self._call
        stmt = self._note_stmt(
            self._notes, storable.text(note), None if fraction is None else float(fraction)
        )

        async def write() -> None:
            await self._write(stmt, "progress")
            get_context().ledger.announce(c.spec)

        return self._later(write())

    def _note_stmt(self, number: int, text: str, fraction: float | None) -> pg.Stmt:
        """Progress note ``number`` of this call (an ask's note too)."""
        c = self._call
        return deltas.progress_stmt(
            c.spec["session_id"],
            c.spec["run_seq"],
            c.turn,
            c.tool_call_id,
            c.tool,
            number,
            text,
            fraction,
        )

    # --- questions ---------------------------------------------------------------------------

    async def ask(
        self, target: ClientTool | _ApprovalAsk | FormAsk, input: Any, within: timedelta | None
    ) -> Any:
        self._notes += 1  # the wait's number is its note's (``ask_id``)
        note = self._notes
        c = self._call
        ask_id = ids.ask_id(c.tool_call_id, note)
        if isinstance(target, ClientTool):
            kind, name, schema = "client", target.name, target.output_schema
            arguments = target.validate_arguments(input).model_dump(mode="json")
        elif isinstance(target, _ApprovalAsk):
            kind, name, schema = "approval", c.tool, None
            check_json(input, "the approval's input")
            arguments = input
        elif isinstance(target, FormAsk):
            kind, name, schema, arguments = "client", target.name, target.schema, target.arguments
        else:
            raise TypeError(f"ctx.ask takes a client tool or APPROVAL, got {target!r}")
        timeout = within or c.agent.wait_timeout(name)
        await self.flush()
        stmt = pending.open_once_stmt(
            root_session_id=c.spec["root_session_id"],
            tool_call_id=ask_id,
            owner_session_id=c.spec["session_id"],
            owner_workflow_id=c.workflow_id,
            kind=kind,
            tool=name,
            arguments=json.dumps(arguments),
            output_schema=schema,
            user_id=c.spec["user_id"],
            tenant_id=c.spec["tenant_id"],
            deadline=time.time() + timeout.total_seconds(),
        )
        waiting = "waiting for approval" if kind == "approval" else f"waiting for {name}"
        shown = [
            self._note_stmt(note, waiting, None),
            *deltas.wait_mark_stmts(
                c.spec["session_id"], c.spec["root_session_id"], [(ask_id, name)]
            ),  # in a sub-agent: chat UIs follow the root
        ]
        async with drain.step():  # the wait and its note (readers: ``event: pending``)
            deadline = float((await self._one_of([stmt, *shown], "open ask")).deadline)
        get_context().ledger.announce(c.spec)
        delivery = await wait_for_submission(c.spec, kind, name, ask_id, deadline, park=False)
        if delivery is None:
            raise AskTimeoutError(name, ask_id, timeout.total_seconds())
        await self._write(pending.resolve_stmt(c.spec["root_session_id"], ask_id), "resolve ask")
        if isinstance(target, FormAsk):
            return delivery
        if isinstance(delivery, ErrorDelivery):
            raise StepFailedError(f"ask {name}", "ClientError", delivery.error)
        if isinstance(target, ClientTool) and isinstance(delivery, ResultDelivery):
            try:
                return target.output.model_validate(delivery.result)
            except ValidationError as exc:
                raise StepFailedError(f"ask {name}", "ValidationError", str(exc)) from exc
        if isinstance(delivery, ApprovalDelivery):
            return Decision(delivery.approved, delivery.reason, delivery.decided_by)
        raise StepFailedError(f"ask {name}", "ClientError", f"unexpected {delivery.kind!r}")

    # --- writes ------------------------------------------------------------------------------

    async def flush(self) -> None:
        """Wait for the checkpoints and notes written so far (the next step comes after)."""
        while self._writes:
            writes, self._writes = self._writes, []
            await asyncio.gather(*writes)

    def _later(self, write: Awaitable[None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(write)
        self._writes.append(task)
        return task

    async def _one_of(self, stmts: list[pg.Stmt], what: str) -> Any:
        """The first statement's row, all of them in one transaction."""

        async def go() -> Any:
            async with pg.transaction(self._engine) as batch:
                first = await batch.send(stmts[0])
                await batch.send_all(stmts[1:])
                (row,) = await first.fetchall()
            return row

        return await retry_transient(what, go)

    async def _write(self, stmt: pg.Stmt, what: str) -> None:
        await retry_transient(what, lambda: pg.script(self._engine, [stmt]))


async def _done() -> None:
    return None


async def _invoke(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], info: StepInfo
) -> Any:
    _current.set(info)  # in the step's own context (outside the workflow's)
    if inspect.iscoroutinefunction(fn):
        return await fn(*args, **kwargs)
    result = await asyncio.to_thread(fn, *args, **kwargs)
    if inspect.isawaitable(result):
        return await result
    return result


def _adapter(fn: Callable[..., Any]) -> TypeAdapter[Any] | None:
    """The step's output type from ``fn``'s return annotation (None: plain JSON)."""
    try:
        return _ADAPTERS[fn]
    except (KeyError, TypeError):
        pass
    adapter: TypeAdapter[Any] | None = None
    try:
        hint = typing.get_type_hints(fn).get("return")
    except Exception:
        hint = None
    if hint is not None and hint is not Any and hint is not type(None):
        if typing.get_origin(hint) in (Awaitable, typing.Coroutine):
            hint = typing.get_args(hint)[-1]
        adapter = TypeAdapter(hint)
    with contextlib.suppress(TypeError):  # an unhashable callable: not cached
        _ADAPTERS[fn] = adapter
    return adapter


def _dump(adapter: TypeAdapter[Any] | None, value: Any, what: str) -> JSONValue:
    if adapter is None:
        check_json(value, what)
        return typing.cast(JSONValue, json.loads(json.dumps(value)))
    dumped: JSONValue = adapter.dump_python(value, mode="json")
    return dumped


def _typed(adapter: TypeAdapter[Any] | None, output: Any) -> Any:
    """The recorded output as the body gets it, the same on every execution."""
    return output if adapter is None else adapter.validate_python(output)


__all__ = ["Call", "Ops"]
