"""The one place errors become HTTP responses, all of one shape (``ErrorBody``):
``{"error": CODE, "message": ..., "details": [...]}`` (``details`` only when there are).

``DbosAgentsError`` subclasses map by their stable ``code``; a malformed body is 400
``INVALID_REQUEST`` (not FastAPI's 422); HTTP errors raised by routes, auth and routing
get a code named after their status; a submit with no wait to answer is 404
``UNKNOWN_TOOL_CALL``; a lost database is 503; anything else is a 500 that says nothing
about internals. Codes are UPPER_CASE; the lower-case words (``already_completed``...)
are outcomes of a submit that succeeded as a request, never errors.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..errors import DbosAgentsError, InvalidResultError
from .schemas import ErrorBody

log = logging.getLogger("dbos_agents.server")

STATUS_BY_CODE: dict[str, int] = {
    "SESSION_NOT_FOUND": 404,
    "UNKNOWN_AGENT": 404,
    "TURN_NOT_FOUND": 404,
    "SESSION_BUSY": 409,
    "ACCESS_DENIED": 403,
    "INVALID_REQUEST": 400,
    "INVALID_RESULT": 400,
    "NOT_ROOT_SESSION": 400,
    "UNKNOWN_TOOL_CALL": 404,
    "DATABASE_UNAVAILABLE": 503,
    "AGENT_UNAVAILABLE": 503,
}
"""Codes not listed answer 500."""

CODE_BY_STATUS: dict[int, str] = {
    400: "INVALID_REQUEST",
    401: "UNAUTHORIZED",
    403: "FORBIDDEN",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    409: "CONFLICT",
    411: "LENGTH_REQUIRED",
    413: "PAYLOAD_TOO_LARGE",
    503: "SERVICE_UNAVAILABLE",
}

_DESCRIPTIONS = {
    400: "INVALID_REQUEST (malformed body, wrong kind), INVALID_RESULT (with details), "
    "NOT_ROOT_SESSION.",
    401: "UNAUTHORIZED: missing, malformed, expired or forged token.",
    403: "FORBIDDEN: a valid token for another session (or a refused operation); "
    "ACCESS_DENIED: another user's or tenant's session.",
    404: "SESSION_NOT_FOUND; UNKNOWN_AGENT (POST /sessions, with ServerSettings.agents); "
    "UNKNOWN_TOOL_CALL (submit-tool-result: no open wait; details[0].reason is no_session, "
    "no_pending_call, interrupted or run_ended); TURN_NOT_FOUND (fork, history at_turn).",
    409: "SESSION_BUSY: the session's run is still going.",
    411: "LENGTH_REQUIRED: a chunked body (send Content-Length; no header is an empty body).",
    413: "PAYLOAD_TOO_LARGE: Content-Length over max_body_bytes.",
    503: "DATABASE_UNAVAILABLE; AGENT_UNAVAILABLE (a start while every worker of the agent"
    " is down, with start_when_no_worker = refuse).",
}
ERROR_RESPONSES: dict[int, dict[str, Any]] = {
    code: {"model": ErrorBody, "description": text} for code, text in _DESCRIPTIONS.items()
}


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """A route's documented error answers (FastAPI's ``responses=``)."""
    return {c: ERROR_RESPONSES[c] for c in codes}


def error_json(
    status: int,
    code: str,
    message: str,
    details: list[dict[str, Any]] | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    body: dict[str, Any] = {"error": code, "message": message}
    if details is not None:
        body["details"] = details
    return JSONResponse(body, status_code=status, headers=headers)


def unknown_tool_call(session_id: str, tool_call_id: str, reason: str | None) -> JSONResponse:
    """A submit with no wait to answer: 404 in the common shape, the reason as a detail."""
    return error_json(
        404,
        "UNKNOWN_TOOL_CALL",
        f"no open wait for tool call {tool_call_id!r} in session {session_id!r}",
        [{"reason": reason or "no_pending_call"}],
    )


async def _agents_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, DbosAgentsError)
    status = STATUS_BY_CODE.get(exc.code, 500)
    if status == 500:
        log.error("request failed", exc_info=exc, extra={"event": "server.error"})
    details = exc.errors if isinstance(exc, InvalidResultError) else None
    return error_json(status, exc.code, str(exc), details)


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    details = [
        {"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")), "type": e.get("type")}
        for e in exc.errors()
    ]
    summary = "; ".join(f"{'.'.join(map(str, d['loc']))}: {d['msg']}" for d in details[:5])
    return error_json(400, "INVALID_REQUEST", f"invalid request: {summary}", details)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = CODE_BY_STATUS.get(exc.status_code, f"HTTP_{exc.status_code}")
    return error_json(exc.status_code, code, str(exc.detail), headers=exc.headers)


async def _database_error(request: Request, exc: Exception) -> JSONResponse:
    log.warning("database error", exc_info=exc, extra={"event": "server.database_error"})
    return error_json(503, "DATABASE_UNAVAILABLE", "the database does not answer; retry later")


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.error("unexpected error", exc_info=exc, extra={"event": "server.error"})
    return error_json(500, "INTERNAL_ERROR", "internal server error")


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(DbosAgentsError, _agents_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(sa.exc.OperationalError, _database_error)
    app.add_exception_handler(sa.exc.InterfaceError, _database_error)
    app.add_exception_handler(Exception, _unexpected)
