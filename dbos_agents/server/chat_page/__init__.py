"""The example chat page (``/chat/{agent}``): the AI SDK's chat class over
``POST /ai-sdk/{agent}``, as a plain page. Off by default; ``ServerSettings.chat_page`` turns
it on (docs/ai-sdk.md). Everything it loads is served here: ``static/chat.js`` is the bundle
``npm run build-chat-page`` makes from ``js/chat-page/main.mjs``."""

from __future__ import annotations

import html
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from ...errors import UnknownAgentError
from ...outcome import TERMINAL
from ..chats import open_chat
from ..context import ServerContext
from .transcript import ui_messages

__all__ = ["install"]

_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{agent} - dbos-agents</title>
<link rel="stylesheet" href="/chat/static/chat.css">
</head>
<body>
<main id="chat" data-agent="{agent}">
  <header><h1>{agent}</h1><span id="status"></span>
    <button id="new-chat" type="button">New chat</button></header>
  <p id="connection" role="status" hidden></p>
  <div id="messages" aria-live="polite"></div>
  <p id="composer-error" role="alert" hidden></p>
  <form id="composer"><input name="text" autocomplete="off" placeholder="Message {agent}"
    aria-label="Message"><button type="submit">Send</button></form>
</main>
<script type="module" src="/chat/static/chat.js"></script>
</body>
</html>
"""

_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self';"
    " base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
"""Only what this server serves, and fetches back to it."""

router = APIRouter(include_in_schema=False)


@router.get("/chat/{agent}", response_class=HTMLResponse)
async def chat_page(request: Request, agent: str) -> HTMLResponse:
    ctx: ServerContext = request.app.state.dbos_agents
    allowed = ctx.settings.agents
    if allowed is not None and agent not in allowed:
        raise UnknownAgentError(agent, allowed)
    body = _PAGE.format(agent=html.escape(agent, quote=True))
    return HTMLResponse(body, headers={"Content-Security-Policy": _CSP})


@router.get("/chat/{agent}/{chat_id}/history")
async def chat_history(request: Request, agent: str, chat_id: str) -> dict[str, Any]:
    """The whole conversation as ``UIMessage`` objects, and whether a run is active (the page
    then resumes its stream). A chat not started yet has no messages."""
    chat = await open_chat(request, agent, chat_id, operation="read_session", field="chat_id")
    if not chat.exists:
        return {"messages": [], "active": False}
    ctx: ServerContext = request.app.state.dbos_agents
    history = await ctx.acting(chat.access).history(chat.session_id)
    active = chat.session().status not in TERMINAL
    return {"messages": ui_messages(chat_id, history), "active": active}


@router.get("/chat/{agent}/{chat_id}/pending")
async def chat_pending(request: Request, agent: str, chat_id: str) -> dict[str, Any]:
    """The chat's open waits with the answer each expects (its JSON schema): what the page
    builds a client tool's form from, as ``dbos-agents pending`` and the inbox show it."""
    chat = await open_chat(request, agent, chat_id, operation="read_pending", field="chat_id")
    if not chat.exists:
        return {"pending": []}
    ctx: ServerContext = request.app.state.dbos_agents
    rows = await ctx.acting(chat.access).pending(session_id=chat.session_id)
    return {
        "pending": [
            {
                "toolCallId": r.tool_call_id,
                "tool": r.tool,
                "kind": r.kind,
                "outputSchema": r.output_schema,
            }
            for r in rows
        ]
    }


def install(app: FastAPI) -> None:
    """Add the page and its static files to ``app``."""
    app.include_router(router)
    app.mount(
        "/chat/static",
        StaticFiles(packages=[("dbos_agents.server.chat_page", "static")]),
        name="chat-static",
    )
