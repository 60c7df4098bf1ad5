"""Rendering: the Jinja2 environment, its filters, and the headers every page carries."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.templating import Jinja2Templates

from ...errors import InvalidResultError
from ...records import SubmitOutcome

TEMPLATES = Jinja2Templates(directory=str(Path(__file__).parent / "templates"))

SECURITY_HEADERS = {
    # No inline script or style, nothing from elsewhere, never framed (clickjacking).
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self';"
        " form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "Cache-Control": "no-store",
    "Referrer-Policy": "same-origin",
    "X-Content-Type-Options": "nosniff",
}


def span(seconds: float) -> str:
    """A short duration: ``1h 02m``, ``4m 05s``, ``12s`` (countdown.js writes the same)."""
    s = max(0, int(seconds))
    if s >= 3600:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{s}s"


def countdown(deadline: datetime, now: datetime) -> str:
    left = (deadline - now).total_seconds()
    return span(left) if left > 0 else "timed out"


def age(since: datetime, now: datetime) -> str:
    return span((now - since).total_seconds())


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


TEMPLATES.env.filters.update(span=span, pretty=pretty)
TEMPLATES.env.globals.update(countdown=countdown, age=age)


def page(
    request: Request, name: str, context: dict[str, Any], status_code: int = 200
) -> HTMLResponse:
    response = TEMPLATES.TemplateResponse(request, name, context, status_code=status_code)
    response.headers.update(SECURITY_HEADERS)
    return response


def see_other(url: str) -> RedirectResponse:
    """POST-redirect-GET: a reload of the page after a decision never repeats it."""
    response = RedirectResponse(url, status_code=303)
    response.headers.update(SECURITY_HEADERS)
    return response


_REASONS = {
    "interrupted": "the session was interrupted; nothing was sent",
    "run_ended": "the run that waited has ended; nothing was sent",
    "no_pending_call": "no such call is waiting",
    "no_session": "no such session",
}
NOTICES = {
    "accepted": "Accepted: the session continues.",
    "already_completed": "Already answered (by someone else, or by an earlier click).",
    "late_answer_after_timeout": (
        "Too late: the call had timed out. The answer is kept for the record and the"
        " agent is told once; it did not wait for it."
    ),
    **{f"unknown_tool_call:{k}": f"Not delivered: {v}." for k, v in _REASONS.items()},
}
"""The outcome banner, by ``status`` (or ``unknown_tool_call:<reason>``); the redirect
names one of these keys, so nothing from the query string is rendered as a message."""


def outcome_key(outcome: SubmitOutcome) -> str:
    if outcome.status == "unknown_tool_call":
        return f"unknown_tool_call:{outcome.reason or 'no_pending_call'}"
    return outcome.status


def error_lines(exc: Exception) -> list[str]:
    """A typed error as lines for the page: the message, then each schema violation."""
    lines = [str(exc)]
    if isinstance(exc, InvalidResultError):
        lines += [f"{e['path']}: {e['message']}" for e in exc.errors]
    return lines
