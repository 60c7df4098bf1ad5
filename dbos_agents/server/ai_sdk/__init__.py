"""The Vercel AI SDK's chat transport over a session (``POST /ai-sdk/{agent}``)."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(tags=["chat UIs"])

__all__ = ["router"]
