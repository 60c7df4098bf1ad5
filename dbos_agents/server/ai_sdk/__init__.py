"""The Vercel AI SDK's chat transport over a session (``POST /ai-sdk/{agent}``): a
``useChat`` page (``DefaultChatTransport``) talks to an agent, its chat id naming the
session (``server/chats.py``); see docs/ai-sdk.md."""

from __future__ import annotations

from .routes import router

__all__ = ["router"]
