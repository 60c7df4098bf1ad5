"""``POST /ai-sdk/{agent}`` (what ``DefaultChatTransport`` posts) and
``GET /ai-sdk/{agent}/{chat_id}/stream`` (its ``reconnectToStream``)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

from fastapi import APIRouter, Request, Response
from sse_starlette import EventSourceResponse

from ...events import Cursor
from ...outcome import TERMINAL
from ..chats import Chat, ctx_of, open_chat, require_existing, say
from ..context import ServerContext
from ..errors import error_responses
from ..follow import Limits
from ..moves import Answer, Say, approver, deliver
from .answers import plan
from .mapping import RunParts, message_id
from .parts import ErrorPart, Finish, Part, SessionPart, Start
from .request import ChatRequest
from .stream import TOKEN_HEADER, parts_of, respond, run_parts

router = APIRouter(tags=["chat UIs"])

_STREAM: dict[int | str, dict[str, object]] = {
    200: {"content": {"text/event-stream": {}}, "description": "A UI message stream."}
}


def _errors(*codes: int) -> dict[int | str, dict[str, object]]:
    return {**_STREAM, **error_responses(*codes)}


@router.post(
    "/ai-sdk/{agent}",
    response_class=EventSourceResponse,
    responses=_errors(400, 401, 403, 404, 409, 411, 413),
)
async def chat_post(request: Request, agent: str, body: ChatRequest) -> EventSourceResponse:
    """Send the chat's newest move (a user message, client-tool outputs, approval
    responses) and stream the run's answer as the AI SDK's UI message stream."""
    move = plan(body)
    if isinstance(move, Say):
        chat = await open_chat(request, agent, body.id, operation="send_message")
        return await _say(request, chat, move)
    chat = await open_chat(request, agent, body.id, operation=move.submit[0].operation)
    require_existing(chat)
    return await _answer(request, chat, move.submit)


async def _say(request: Request, chat: Chat, move: Say) -> EventSourceResponse:
    ctx = ctx_of(request)
    run_seq, after = 1, Cursor()
    if chat.exists:
        run_seq = chat.session().run_seq + 1
        after = chat.runs().following
    token = await say(request, chat, move.text)
    head: list[Part] = []
    headers: dict[str, str] = {}
    if token is not None:
        head.append(SessionPart(data={"token": token}))
        headers[TOKEN_HEADER] = token
    return _respond(ctx, chat, run_seq, after, head, headers)


async def _answer(request: Request, chat: Chat, answers: list[Answer]) -> EventSourceResponse:
    ctx = ctx_of(request)
    # open_chat let the first answer's operation in; the others are asked for on their own.
    first = answers[0].operation
    let_in = {first: chat.access}
    for op in {a.operation for a in answers} - {first}:
        let_in[op] = await ctx.authorize(request, op, chat.session_id, chat.seen)
    approving = let_in.get("decide_approval")
    who = approver(ctx, approving) if approving is not None else None
    run_seq = chat.session().run_seq
    after = chat.runs().asked
    reached, problems = await deliver(ctx, chat.access, chat.session_id, answers, who)
    head: list[Part] = [ErrorPart(error_text=p) for p in problems]
    if not reached:
        start = Start(message_id=message_id(chat.chat_id, run_seq))
        return respond(ctx.settings, start, parts_of(*head, Finish(finish_reason="error")))
    return _respond(ctx, chat, run_seq, after, head, {})


def _respond(
    ctx: ServerContext,
    chat: Chat,
    run_seq: int,
    after: Cursor,
    head: list[Part],
    headers: dict[str, str],
) -> EventSourceResponse:
    clock = ctx.tokens.clock if ctx.tokens is not None else time.time
    limits = Limits.of(ctx.settings, chat.access.token, clock)
    mid = message_id(chat.chat_id, run_seq)
    parts = RunParts(run_seq, mid)

    async def body() -> AsyncIterator[list[Part]]:
        if head:
            yield head
        async for read in run_parts(ctx.agent_client(), chat.session_id, parts, after, limits):
            yield read

    return respond(ctx.settings, Start(message_id=mid), body(), headers)


@router.get(
    "/ai-sdk/{agent}/{chat_id}/stream",
    response_class=EventSourceResponse,
    responses={204: {"description": "No run is active."}, **_errors(400, 401, 403, 404)},
)
async def chat_resume(request: Request, agent: str, chat_id: str) -> Response:
    """The active run's stream from its beginning (the page replaces its partial message
    with it), or 204 when no run is active."""
    chat = await open_chat(request, agent, chat_id, operation="read_events", field="chat_id")
    if not chat.exists:
        return Response(status_code=204)
    ctx = ctx_of(request)
    info = chat.session()
    if info.status in TERMINAL:
        return Response(status_code=204)
    return _respond(ctx, chat, info.run_seq, chat.runs().start, [], {})
