"""The app of the stale-writer test: ``stream_app``'s streamed agent, in a worker that is
slow to notice it was adopted. Its heartbeat thread waits ``STALE_EXIT_DELAY_SEC`` before
it reads why its row is gone (and exits), as when the heartbeat's connection is slower than
the stream's (an asymmetric partition): the stream then runs on, and the fence, not the
exit, must keep its pieces out."""

from __future__ import annotations

import os
import time

from dbos_agents.worker import presence

from .stream_app import runtime

__all__ = ["runtime"]

_lost_row = presence.Presence._lost_row


def _noticed_late(self: presence.Presence) -> str:
    time.sleep(float(os.environ.get("STALE_EXIT_DELAY_SEC", "3")))
    return _lost_row(self)


presence.Presence._lost_row = _noticed_late  # type: ignore[method-assign]
