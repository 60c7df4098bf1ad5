"""Run outcomes handed from a workflow to a waiter in the same process.

Every run records its outcome in ``runs`` and announces it with a ``NOTIFY``, which a
waiter in any process hears (``live.listen``). When the waiter is in the process that ran
the workflow, that trip through the database is most of ``result()``'s latency, so the
workflow also hands the outcome over here (``store.runs.run_key`` names the run), once it
is durable, and a local waiter takes whichever comes first.
"""

from __future__ import annotations

from ..outcome import RunOutcome
from ..waiters import Waiters

handover: Waiters[RunOutcome] = Waiters()
"""``waiter(key)`` / ``discard``; ``resolve(key, outcome)`` only once the outcome is
durable, so a waiter never sees what a crash could undo."""
