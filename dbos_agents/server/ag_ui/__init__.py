"""AG-UI over a session (``POST /ag-ui/{agent}``); see docs/ag-ui.md.

One module per idea: ``parse`` (the ``RunAgentInput``), ``reconcile`` (what the posted
thread asks of the session), ``view`` (the client's copy of the transcript), ``mapping``
(the session's log as AG-UI events), ``stream`` (the SSE body), ``route`` (the route),
``page`` (the page's tools, state, context and forwarded props for the run), ``shared_state``
(the typed state as the page holds it: JSON Patch deltas).
"""

from __future__ import annotations

from .mapping import PROGRESS_EVENT
from .route import TOKEN_EVENT, TOKEN_HEADER, router

__all__ = ["PROGRESS_EVENT", "TOKEN_EVENT", "TOKEN_HEADER", "router"]
