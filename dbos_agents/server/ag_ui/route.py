"""``POST /ag-ui/{agent}``: an AG-UI run (``RunAgentInput`` in, AG-UI events out) on the
session of the thread (``chats.py``: thread id -> session id).

Before the response starts, everything that can be refused is (JSON errors as on every
route: 400 naming the field, 401/403, 404, 409 while a run is going); then the request's
new part is applied (``reconcile``; a new message carries the page's tools, context,
forwarded props and state with its run, ``page``) and the session's log is streamed from
a cursor read *before* it was applied, so nothing the run writes is missed. An answer for a tool call
nothing waits on changes nothing and ends the run with ``RUN_ERROR``.
"""

from __future__ import annotations

import time
from typing import Any

from ag_ui.core import BaseEvent, CustomEvent, RunAgentInput, RunErrorEvent, RunStartedEvent
from fastapi import APIRouter, Request
from sse_starlette import EventSourceResponse

from ...errors import InvalidRequestError
from ...events import Cursor
from ...records import HistoryEntry, PageInput
from ..chats import Chat, ctx_of, open_chat, require_existing
from ..context import ServerContext
from ..errors import error_responses
from ..events import SEP
from ..follow import Limits
from ..moves import Answers, approver, submit
from .mapping import Mapper
from .page import page_input
from .parse import parse_input
from .reconcile import answers_of, new_message, operation_of
from .shared_state import PageState
from .stream import encode, run_stream
from .view import ClientView

router = APIRouter(tags=["chat UIs"])

__all__ = ["TOKEN_EVENT", "TOKEN_HEADER", "router"]

TOKEN_HEADER = "x-dbos-agents-token"
TOKEN_EVENT = "dbos-agents.session-token"
"""The ``CUSTOM`` event that carries a new thread's session token (``value.token``)."""

_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": "AG-UI `RunAgentInput` (https://docs.ag-ui.com): threadId, runId,"
        " messages, tools, state, context, forwardedProps, resume.",
        "content": {"application/json": {"schema": {"type": "object"}}},
    }
}


@router.post(
    "/ag-ui/{agent}",
    response_class=EventSourceResponse,
    responses={
        200: {"content": {"text/event-stream": {}}, "description": "AG-UI events (SSE)."},
        **error_responses(400, 401, 403, 404, 409, 411, 413),
    },
    openapi_extra=_BODY,
)
async def run_agent(request: Request, agent: str) -> EventSourceResponse:
    """Run the thread's session: a new user message, a frontend tool's result or an
    approval (``resume``), or nothing new (a rerun: the current run again from its start);
    answered with AG-UI events. See docs/ag-ui.md."""
    body = parse_input(await request.body())
    chat = await open_chat(
        request, agent, body.thread_id, operation=operation_of(body), field="threadId"
    )
    ctx = ctx_of(request)
    if not chat.exists:
        return await _new_thread(request, ctx, chat, body)
    client = ctx.acting(chat.access)
    info = chat.session()
    history = await client.history(chat.session_id)
    end = Cursor(history[-1].seq if history else 0)
    view = ClientView(list(body.messages))
    text = new_message(body, info.run_seq)
    if text is not None:
        stored = await client.state_version(chat.session_id)
        current, latest = (None, 0) if stored is None else (stored.state, stored.version)
        page = page_input(body, current, latest, starts_run=True)
        await client.send(chat.session_id, text, page=page or None)
        posted = PageState(body.state, posted="state" in page)  # the run commits it
        mapper = Mapper(view, info.run_seq + 1, *_ids(body), state=posted)
        return _respond(ctx, chat, body, mapper, end, [])
    page_input(body, None, 0, starts_run=False)  # the tools are checked all the same
    held = PageState(body.state)  # not committed: no run starts
    answers = answers_of(
        body, info.run_seq, history, await client.pending(session_id=chat.session_id)
    )
    mapper = Mapper(view, info.run_seq, *_ids(body), state=held)
    if answers.unknown:
        return _refused(ctx, chat, body, answers)
    access, who = chat.access, None
    if answers.approvals:  # an authority of its own (as on the submit route)
        access = await ctx.authorize(request, "decide_approval", chat.session_id, chat.seen)
        who = approver(ctx, access)
    done = await submit(ctx, access, chat.session_id, answers.submit, who, strict=True)
    if done.problems:  # a wait closed meanwhile
        return _refused(ctx, chat, body, answers)
    if done.accepted:
        return _respond(ctx, chat, body, mapper, end, [])
    # Nothing new: the current run again, from its start, in place of what the client has.
    opening: list[BaseEvent] = [view.snapshot()] if view.drop_run(info.run_seq) else []
    return _respond(ctx, chat, body, mapper, _run_start(history, info.run_seq, end), opening)


def _ids(body: RunAgentInput) -> tuple[str, str]:
    return body.thread_id, body.run_id


async def _new_thread(
    request: Request, ctx: ServerContext, chat: Chat, body: RunAgentInput
) -> EventSourceResponse:
    text = new_message(body, 0)
    if text is None:
        if body.resume or operation_of(body) != "read_events":
            require_existing(chat)  # an answer for a thread that never started: 404
        raise InvalidRequestError("messages: a new thread's last message is the user's")
    page = page_input(body, None, 0, starts_run=True)
    token = await _start(ctx, chat, text, page)
    held = PageState(body.state, posted="state" in page)
    opening: list[BaseEvent] = []
    headers: dict[str, str] = {}
    if token is not None:
        # The client sends it back as ``Authorization: Bearer`` on the thread's next runs.
        headers[TOKEN_HEADER] = token
        opening.append(CustomEvent(name=TOKEN_EVENT, value={"token": token}))
    mapper = Mapper(ClientView(list(body.messages)), 1, *_ids(body), state=held)
    return _respond(ctx, chat, body, mapper, Cursor(), opening, headers)


async def _start(ctx: ServerContext, chat: Chat, text: str, page: PageInput) -> str | None:
    """A new thread's first run, with the page's input (``chats.say`` otherwise); returns
    a session token when the server issues them."""
    p = chat.access.principal
    await ctx.agent_client().start(
        chat.agent,
        text,
        session_id=chat.session_id,
        user_id=p.user_id if p is not None else None,
        tenant_id=p.tenant_id if p is not None else None,
        page=page or None,
    )
    return None if ctx.tokens is None else ctx.tokens.issue(chat.session_id).token


def _run_start(history: list[HistoryEntry], run_seq: int, end: Cursor) -> Cursor:
    """Where run ``run_seq`` starts in the log: right after its user message (its first);
    the log's end while the run has not written it yet (queued)."""
    first = next((h.seq for h in history if h.run_seq == run_seq), None)
    return end if first is None else Cursor(first)


def _refused(
    ctx: ServerContext, chat: Chat, body: RunAgentInput, answers: Answers
) -> EventSourceResponse:
    ids = ", ".join(repr(i) for i in answers.unknown) or "(a wait that closed meanwhile)"
    message = f"no open wait for tool call {ids} in this thread: nothing was submitted"

    async def events() -> Any:
        started = RunStartedEvent(thread_id=body.thread_id, run_id=body.run_id)
        for chunk in encode([started, RunErrorEvent(message=message, code="UNKNOWN_TOOL_CALL")]):
            yield chunk

    return _sse(ctx, events(), {})


def _respond(
    ctx: ServerContext,
    chat: Chat,
    body: RunAgentInput,
    mapper: Mapper,
    start: Cursor,
    opening: list[BaseEvent],
    headers: dict[str, str] | None = None,
) -> EventSourceResponse:
    clock = ctx.tokens.clock if ctx.tokens is not None else time.time
    limits = Limits.of(ctx.settings, chat.access.token, clock)
    started = RunStartedEvent(thread_id=body.thread_id, run_id=body.run_id)
    stream = run_stream(
        ctx.agent_client(), chat.session_id, start, mapper, [started, *opening], limits
    )
    return _sse(ctx, stream, headers or {})


def _sse(ctx: ServerContext, body: Any, headers: dict[str, str]) -> EventSourceResponse:
    s = ctx.settings
    return EventSourceResponse(
        body,
        headers={"Cache-Control": "no-cache", **headers},
        ping=s.events_keepalive_sec,
        sep=SEP,
        send_timeout=s.events_send_timeout_sec,
    )
