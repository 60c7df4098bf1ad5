"""The session's typed state as the page holds it: each committed version (a ``StateEvent``)
is sent as a ``STATE_DELTA`` (JSON Patch, RFC 6902) from what the page holds, or as a
``STATE_SNAPSHOT`` when it holds nothing yet. Every state sent carries its version
(``page.VERSION_KEY``), so the page's next run names the version its state is based on.
"""

from __future__ import annotations

from typing import Any, cast

import jsonpatch
from ag_ui.core import BaseEvent, StateDeltaEvent, StateSnapshotEvent

from ...events import StateEvent
from ...messages import JSONValue
from .page import VERSION_KEY

__all__ = ["PageState"]


class PageState:
    """What the page holds (the posted state, then every state sent); ``held`` None: the
    page holds nothing the server can patch (it is sent a snapshot)."""

    def __init__(self, held: JSONValue | None, posted: bool = False) -> None:
        self.held = held if isinstance(held, dict) and held else None
        self.unsettled = posted and self.held is not None
        """The run commits the page's own state (no ``StateEvent`` tells its version): the
        stream reads the version before the AG-UI run ends (``settle``)."""

    def settle(self, version: int) -> BaseEvent | None:
        """The session's latest ``version`` as the AG-UI run ends, for a page whose state
        the run committed (unchanged when the run refused it: the page keeps its base)."""
        self.unsettled = False
        if self.held is None or self.held.get(VERSION_KEY, 0) == version:
            return None
        new = {**self.held, VERSION_KEY: version}
        patch = jsonpatch.make_patch(self.held, new).patch
        self.held = new
        return StateDeltaEvent(delta=cast(Any, patch))

    def event(self, e: StateEvent) -> BaseEvent | None:
        """The event that brings the page to ``e``'s version (None: it holds it already)."""
        new: JSONValue = (
            {**e.state, VERSION_KEY: e.version} if isinstance(e.state, dict) else e.state
        )
        old, self.held = self.held, new if isinstance(new, dict) else None
        self.unsettled = False  # a later version than the page's own commit
        if old is None:
            return StateSnapshotEvent(snapshot=new)
        patch = jsonpatch.make_patch(old, new).patch
        return StateDeltaEvent(delta=cast(Any, patch)) if patch else None
