"""AG-UI over a session (``POST /ag-ui/{agent}``)."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(tags=["chat UIs"])

__all__ = ["router"]
