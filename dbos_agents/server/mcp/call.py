"""``tools/call``: an agent called as one tool.

A call starts a session (or sends the message to the session its ``_meta`` names) and
waits for the run (``runs.settle``). Its end is the result: the final answer as text, or
``isError: true`` with why the run failed, was interrupted or stopped; ``_meta`` names the
session. While the run waits on client tools or approvals the caller may answer:

- 2026-07-28: an ``InputRequiredResult`` with one form elicitation per wait and a sealed
  ``requestState`` (``state.py``); the client retries with ``inputResponses``, each answer
  is submitted to the root session (idempotent: one already answered is no error), and
  the retry waits on, until the run ends or waits again. A run still going after
  ``mcp_max_wait_sec`` answers with the state alone: the client calls again.
- earlier versions: the SDK's elicitation in the middle of the call, while its connection
  lives, then the same submit.

A client that cannot answer (no elicitation capability) gets ``isError: true`` naming the
wait; it can be answered elsewhere (the REST API, the inbox).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import mcp_types as types
from fastapi import HTTPException, Request
from mcp.server.context import ServerRequestContext
from mcp_types.version import is_version_at_least

from ...errors import DbosAgentsError, InvalidRequestError, InvalidResultError
from ..auth import Operation
from ..context import ServerContext
from ..moves import NO_APPROVER
from . import access, forms
from .access import Caller
from .catalogue import SESSION_META, TOKEN_META, Catalogue, session_meta, tool_input
from .errors import mcp_error
from .runs import Ended, Running, Waiting, settle
from .state import Asked, CallState

INPUT_REQUIRED_VERSION = "2026-07-28"
"""The first protocol version whose ``tools/call`` may answer ``input_required``."""


class AgentTool:
    """The ``tools/call`` handler of one server (see the module doc)."""

    def __init__(self, ctx: ServerContext, catalogue: Catalogue) -> None:
        self.ctx = ctx
        self.catalogue = catalogue

    async def __call__(
        self, rctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        try:
            return await self._call(rctx, params)
        except (DbosAgentsError, HTTPException) as exc:
            raise mcp_error(exc) from None

    async def _call(
        self, rctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        request = http_request(rctx)
        agent = params.name
        self.catalogue.check(agent)
        meta: dict[str, Any] = {}
        problems: dict[str, str] = {}
        if params.request_state is not None:
            state = CallState.load(params.request_state)
            answers = params.input_responses or {}
            caller = await access.retrying(
                self.ctx, request, state.session_id, _operations(state.asked, answers)
            )
            problems = await self._submit(caller, state.session_id, state.asked, answers)
            sid, run = state.session_id, state.run_seq
        else:
            args = tool_input(params.arguments)
            named = session_meta(params.meta)
            if named is None:
                caller = await access.starting(self.ctx, request)
                p = caller.access.principal
                sid = await caller.client.start(
                    agent,
                    args.message,
                    user_id=p.user_id if p is not None else None,
                    tenant_id=p.tenant_id if p is not None else None,
                )
                token = self.ctx.new_session_token(sid).token
                if token is not None:
                    meta[TOKEN_META] = token
            else:
                caller = await access.continuing(self.ctx, request, named)
                info = await caller.client.session(named)
                if info.agent != agent:
                    raise InvalidRequestError(
                        f"session {named!r} is a session of another agent, not of {agent!r}"
                    )
                sid = await caller.client.send(named, args.message)
            run = (await caller.client.session(sid)).run_seq
        meta[SESSION_META] = sid
        modern = is_version_at_least(rctx.protocol_version, INPUT_REQUIRED_VERSION)
        s = self.ctx.settings
        while True:
            settled = await settle(
                caller.client,
                sid,
                run,
                answerable=lambda w: w.kind != "approval" or caller.may_approve,
                max_wait=s.mcp_max_wait_sec if modern else math.inf,
                poll=s.events_poll_interval_sec,
            )
            if isinstance(settled, Ended):
                return _result(settled, meta)
            if isinstance(settled, Running):
                if modern:  # "call again": the state alone
                    state = CallState(session_id=sid, run_seq=run)
                    return types.InputRequiredResult(request_state=state.dump(), _meta=meta)
                continue
            if not _can_elicit(rctx, modern):
                return _cannot_answer(settled, meta)
            asks = {
                w.tool_call_id: forms.ask(w, agent, problems.get(w.tool_call_id))
                for w in settled.waits
            }
            if modern:
                state = CallState(
                    session_id=sid, run_seq=run, asked={k: a for k, (_, a) in asks.items()}
                )
                return types.InputRequiredResult(
                    input_requests={k: q for k, (q, _) in asks.items()},
                    request_state=state.dump(),
                    _meta=meta,
                )
            problems = await self._ask_now(rctx, request, sid, asks)

    async def _ask_now(
        self,
        rctx: ServerRequestContext[Any, Any],
        request: Request,
        session_id: str,
        asks: Mapping[str, tuple[types.ElicitRequest, Asked]],
    ) -> dict[str, str]:
        """Earlier protocol versions: ask each question in the middle of the call (the
        connection carries it), then submit the answers."""
        answers: dict[str, types.InputResponse] = {}
        for key, (question, _) in asks.items():
            params = question.params
            assert isinstance(params, types.ElicitRequestFormParams)
            answers[key] = await rctx.session.elicit_form(
                message=params.message,
                requested_schema=params.requested_schema,
                related_request_id=rctx.request_id,
            )
        asked = {k: a for k, (_, a) in asks.items()}
        caller = await access.retrying(self.ctx, request, session_id, _operations(asked, answers))
        return await self._submit(caller, session_id, asked, answers)

    async def _submit(
        self,
        caller: Caller,
        session_id: str,
        asked: Mapping[str, Asked],
        answers: Mapping[str, types.InputResponse],
    ) -> dict[str, str]:
        """Submit each answer to the wait it was asked for; returns why the answers that
        could not be submitted were refused (their questions are asked again). An answer
        to a wait that no longer waits (answered elsewhere, timed out, ended) is no error:
        the call waits on."""
        problems: dict[str, str] = {}
        for key, answer in answers.items():
            a = asked.get(key)
            if a is None:
                continue  # not a question of this state: ignored
            try:
                delivery = forms.delivery(a, answer, caller.decided_by)
            except forms.Unreadable as exc:
                problems[a.call] = str(exc)
                continue
            if a.kind == "approval" and not caller.may_approve:
                raise HTTPException(403, NO_APPROVER)
            try:
                outcome = await caller.client.deliver(session_id, a.call, delivery)
            except InvalidResultError as exc:
                problems[a.call] = _refusal(exc)
                self.ctx.metrics.submits.labels(delivery.kind, exc.code).inc()
                continue
            self.ctx.metrics.submits.labels(delivery.kind, outcome.status).inc()
        return problems


def http_request(rctx: ServerRequestContext[Any, Any]) -> Request:
    """The HTTP request that carried the MCP message (what the hook is given)."""
    request = rctx.request
    if not isinstance(request, Request):
        raise HTTPException(401, "MCP calls are served over HTTP only")
    return request


def _operations(asked: Mapping[str, Asked], answers: Mapping[str, object]) -> list[Operation]:
    return [
        "decide_approval" if asked[k].kind == "approval" else "submit_result"
        for k in answers
        if k in asked
    ]


def _can_elicit(rctx: ServerRequestContext[Any, Any], modern: bool) -> bool:
    caps = rctx.session.client_capabilities
    elicitation = caps.elicitation if caps is not None else None
    # A bare ``elicitation: {}`` (from before modes) counts as form support; url-only not.
    form = elicitation is not None and (elicitation.form is not None or elicitation.url is None)
    return form and (modern or rctx.session.can_send_request)


def _text(text: str) -> list[types.ContentBlock]:
    return [types.TextContent(type="text", text=text)]


def _result(ended: Ended, meta: dict[str, Any]) -> types.CallToolResult:
    if ended.status == "completed":
        return types.CallToolResult(content=_text(ended.output or ""), _meta=meta)
    why = f"the agent's run ended {ended.status}" + (f": {ended.error}" if ended.error else "")
    return types.CallToolResult(content=_text(why), is_error=True, _meta=meta)


def _cannot_answer(waiting: Waiting, meta: dict[str, Any]) -> types.CallToolResult:
    names = ", ".join(f"{w.tool} ({w.kind}, call {w.tool_call_id})" for w in waiting.waits)
    return types.CallToolResult(
        content=_text(
            f"the agent's run waits on {names}, which this MCP client cannot answer (it"
            " declared no form elicitation): answer it through the API or the inbox"
        ),
        is_error=True,
        _meta=meta,
    )


def _refusal(exc: InvalidResultError) -> str:
    details = "; ".join(f"{e.get('path')}: {e.get('message')}" for e in exc.errors[:5])
    return f"{exc}: {details}" if details else str(exc)
