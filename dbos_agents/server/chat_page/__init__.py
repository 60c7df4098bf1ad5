"""The example chat page (``/chat/{agent}``): the AI SDK's chat class over
``POST /ai-sdk/{agent}``, as a plain page. Off by default; ``ServerSettings.chat_page`` turns
it on (docs/ai-sdk.md). Everything it loads is served here: ``static/chat.js`` is the bundle
``npm run build-chat-page`` makes from ``js/chat-page/main.mjs``."""

from __future__ import annotations

import html

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from ...errors import UnknownAgentError
from ..context import ServerContext

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
  <div id="messages" aria-live="polite"></div>
  <form id="composer"><input name="text" autocomplete="off" placeholder="Message {agent}"
    aria-label="Message"><button type="submit">Send</button></form>
  <dialog id="ask"><p class="question"></p>
    <button class="yes" type="button">Yes</button>
    <button class="no" type="button">No</button></dialog>
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


def install(app: FastAPI) -> None:
    """Add the page and its static files to ``app``."""
    app.include_router(router)
    app.mount(
        "/chat/static",
        StaticFiles(packages=[("dbos_agents.server.chat_page", "static")]),
        name="chat-static",
    )
