"""Parked waits: a session that waits long for a client tool or an approval holds rows, not
a coroutine.

A wait is ``DBOS.recv_async``: while it waits, the workflow's suspended await chain, DBOS's
contexts, its status and inputs and the waiter's event stay in memory, about 25 KB a
session. A wait still unanswered after ``Settings.park_after_sec`` is *parked*: its
workflow's task is cancelled inside the ``recv`` (DBOS records no outcome for a cancelled
task, so the workflow stays PENDING and owned by this worker, exactly as after a crash at
that wait), and a small stand-in takes the waiter's place in DBOS's waiter map. A
notification for the wait (a submit, an interrupt), the catch-up re-check of lost
notifications, or the wait's deadline then *resumes* it: the ``Parker`` thread takes the
workflow's ownership token over (compare-and-swap on the token the parked execution held,
so nothing else resumed, cancelled or adopted it meanwhile) and re-executes the workflow,
which replays from the database up to the ``recv``, as a recovery does, and reads what was
submitted.

Parked, a session costs about 1 KB here. Only a root session's wait in its workflow's own
task parks (a client tool, an approval, or a persistent session's inbox between runs): a
sub-agent's parent holds the child's task, and a wait inside a turn's concurrent calls has
siblings in flight.
"""

from __future__ import annotations

import asyncio
import contextvars
import heapq
import logging
import queue
import threading
import time
import uuid
import weakref
from dataclasses import dataclass
from typing import Any

from dbos import DBOS

from .. import _dbos
from ..loop import drain
from ..outcome import RunSpec

log = logging.getLogger("dbos_agents")

_root_task: contextvars.ContextVar[weakref.ref[asyncio.Task[Any]] | None] = contextvars.ContextVar(
    "dbos_agents_root_task", default=None
)
"""The workflow's task, weakly: the task's own context holds this, and a strong reference
would make every finished task a cycle that only the garbage collector frees."""
_parking: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "dbos_agents_parking", default=False
)
RETRY_SEC = 1.0
"""A resume that failed (database away) is tried again after this long."""
RESUME_BATCH = 100
"""Waits due at once are claimed together, this many per statement."""


class _DropParkingWarning(logging.Filter):
    """DBOS warns about every cancelled workflow task; a parked one is not news."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (_parking.get() and record.getMessage().startswith("Asyncio task cancelled"))


logging.getLogger("dbos").addFilter(_DropParkingWarning())


class _Wait:
    __slots__ = ("evicted", "over")

    def __init__(self) -> None:
        self.evicted = False
        self.over = False


class _Wake:
    """Stands in DBOS's waiter map for a parked wait: the listener (or the catch-up
    re-check) calls ``set`` when a message for it arrives."""

    __slots__ = ("parker", "workflow_id")

    def __init__(self, parker: Parker, workflow_id: str) -> None:
        self.parker = parker
        self.workflow_id = workflow_id

    def set(self) -> None:
        self.parker.wake(self.workflow_id)

    def is_set(self) -> bool:
        return False


@dataclass(slots=True)
class _Parked:
    topic: str
    owner_xid: str | None
    deadline: float | None
    wake: _Wake
    token: str | None = None
    """The token a resume claims with, kept while it is retried."""


class Parker:
    """Parks long waits of this worker and resumes them (one thread for the resumes); the
    workflow's ``Receiver`` (``loop.context``)."""

    def __init__(self, park_after_sec: float | None, tick_sec: float = 0.25) -> None:
        self.park_after_sec = park_after_sec
        self.tick_sec = tick_sec
        self.parked_total = 0
        """Waits parked since launch."""
        self.resumed_total = 0
        """Parked waits resumed since launch (by a message or by their deadline)."""
        self._lock = threading.Lock()
        self._parked: dict[str, _Parked] = {}
        self._deadlines: list[tuple[float, int, str, _Parked]] = []
        self._seq = 0
        self._inbox: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._check: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dbos-agents-parker", daemon=True)

    @property
    def parked(self) -> int:
        """Waits parked right now."""
        with self._lock:
            return len(self._parked)

    def is_parked(self, workflow_id: str) -> bool:
        with self._lock:
            return workflow_id in self._parked

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop resuming; the parked workflows stay PENDING for the next launch's recovery."""
        self._stop.set()
        self._inbox.put(None)
        self._thread.join(5.0)
        with self._lock:
            parked, self._parked = self._parked, {}
        for wf, p in parked.items():
            _dbos.park_remove_waiter(wf, p.topic, p.wake)

    def enter_workflow(self) -> None:
        """Called as a session workflow begins: its task is the one a wait may cancel."""
        task = asyncio.current_task()
        _root_task.set(None if task is None else weakref.ref(task))

    async def recv(
        self, spec: RunSpec, topic: str, timeout_seconds: float, deadline: float | None
    ) -> object:
        """``DBOS.recv_async(topic, timeout_seconds)`` for the run ``spec``; parks after
        ``park_after_sec`` when ``spec`` is a root session's and the wait runs in its
        workflow's own task. ``deadline`` (epoch seconds) is when the wait times out, and a
        parked wait resumes; ``None``: the time DBOS recorded for the ``recv``'s timeout
        (read once it parks)."""
        task = asyncio.current_task()
        root = _root_task.get()
        if (
            self.park_after_sec is None
            or spec["session_id"] != spec["root_session_id"]
            or root is None
            or task is None
            or root() is not task
        ):
            return await DBOS.recv_async(topic, timeout_seconds=timeout_seconds)
        workflow_id = DBOS.workflow_id
        assert workflow_id is not None
        wait = _Wait()
        timer = asyncio.get_running_loop().call_later(
            self.park_after_sec, self._try_park, task, wait, workflow_id, topic
        )
        try:
            return await DBOS.recv_async(topic, timeout_seconds=timeout_seconds)
        except asyncio.CancelledError:
            if wait.evicted:
                _parking.set(True)
                self._park(workflow_id, topic, _dbos.park_owner(workflow_id), deadline)
            raise
        finally:
            wait.over = True  # a re-armed check (``_try_park``) stops at its next tick
            timer.cancel()

    def _try_park(self, task: asyncio.Task[Any], wait: _Wait, workflow_id: str, topic: str) -> None:
        """On the workflow's loop: cancel the task if it is blocked in the ``recv``'s wait
        with nothing delivered (its event unset). The check and the cancel are one loop
        callback, so the ``recv`` cannot start consuming in between."""
        if wait.over or task.done() or drain.is_draining():
            return
        if not _dbos.park_waiting_unwoken(workflow_id, topic):
            asyncio.get_running_loop().call_later(
                self.tick_sec, self._try_park, task, wait, workflow_id, topic
            )
            return
        wait.evicted = True
        task.cancel()

    def _park(
        self, workflow_id: str, topic: str, owner_xid: str | None, deadline: float | None
    ) -> None:
        wake = _Wake(self, workflow_id)
        with self._lock:
            p = self._parked[workflow_id] = _Parked(topic, owner_xid, deadline, wake)
            if deadline is not None:
                self._push(deadline, workflow_id, p)
            self._check.append(workflow_id)
            self.parked_total += 1
        # Whatever the cancelled recv left in the map goes: the wake is its only waiter.
        _dbos.park_replace_waiters(workflow_id, topic, wake)
        self._inbox.put("")  # look for a message that came between the cancel and now

    def _push(self, at: float, workflow_id: str, p: _Parked) -> None:
        """Under the lock: resume ``p`` at ``at`` (epoch seconds) if still parked then."""
        self._seq += 1
        heapq.heappush(self._deadlines, (at, self._seq, workflow_id, p))

    def wake(self, workflow_id: str) -> None:
        """Any thread: a message for a parked wait arrived."""
        self._inbox.put(workflow_id)

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                next_deadline = self._deadlines[0][0] if self._deadlines else None
            timeout = self.tick_sec
            if next_deadline is not None:
                timeout = max(0.0, min(timeout, next_deadline - time.time()))
            due: list[str] = []
            try:
                item = self._inbox.get(timeout=timeout)
                while True:
                    if item is None:
                        return
                    if item:
                        due.append(item)
                    item = self._inbox.get_nowait()
            except queue.Empty:
                pass
            now = time.time()
            with self._lock:
                while self._deadlines and self._deadlines[0][0] <= now:
                    _, _, wf, p = heapq.heappop(self._deadlines)
                    if self._parked.get(wf) is p:  # not a wait resumed since
                        due.append(wf)
                check, self._check = self._check, []
            if check:
                self._read_deadlines(check)
                due.extend(self._with_messages(check))
            due = list(dict.fromkeys(due))
            for i in range(0, len(due), RESUME_BATCH):
                self._resume(due[i : i + RESUME_BATCH])

    def _read_deadlines(self, workflow_ids: list[str]) -> None:
        """The deadline of each newly parked wait that has none: DBOS's recorded timeout
        (the ``recv``'s sleep). Unreadable (database away): resume soon and park again."""
        with self._lock:
            unknown = [
                wf for wf in workflow_ids if (p := self._parked.get(wf)) and p.deadline is None
            ]
        if not unknown:
            return
        try:
            found = _dbos.park_wake_times(unknown)
        except Exception as exc:
            log.warning("parked wait deadlines not read", extra={"error": str(exc)})
            found = {}
        with self._lock:
            for wf in unknown:
                p = self._parked.get(wf)
                if p is not None and p.deadline is None:
                    p.deadline = found.get(wf, time.time() + RETRY_SEC)
                    self._push(p.deadline, wf, p)

    def _with_messages(self, workflow_ids: list[str]) -> list[str]:
        with self._lock:
            waits = [(wf, p.topic) for wf in workflow_ids if (p := self._parked.get(wf))]
        try:
            return [wf for wf, _ in _dbos.park_unread(waits)]
        except Exception as exc:  # the catch-up re-check finds them later
            log.warning("parked waits not checked", extra={"error": str(exc)})
            return []

    def _resume(self, workflow_ids: list[str]) -> None:
        """Resume these parked waits: one claim for all of them, which reads back what
        their re-execution needs first (a burst of submits arrives here in batches), then
        each re-executes."""
        if drain.is_draining():
            return  # left PENDING: the next launch (or an adopter) recovers it
        with self._lock:
            taken = [(wf, p) for wf in workflow_ids if (p := self._parked.pop(wf, None))]
        # (Not found: resumed already, by a message and the deadline, or two messages.)
        claims: list[tuple[str, str | None, str]] = []
        for wf, p in taken:
            _dbos.park_remove_waiter(wf, p.topic, p.wake)
            # The new token is fixed before the claim: a retry of a claim that committed
            # unacknowledged matches it (``claim_parked``).
            p.token = token = p.token or str(uuid.uuid4())
            claims.append((wf, p.owner_xid, token))
        try:
            claimed = _dbos.park_claim(claims)
        except Exception as exc:  # database away: park them again and retry
            self._retry(taken, exc)
            return
        for wf, p in taken:
            mine = claimed.get(wf)
            if mine is None:  # ended, cancelled or taken over meanwhile: nothing to resume
                log.info(
                    "parked session moved on", extra={"event": "park.dropped", "workflow_id": wf}
                )
                continue
            p.owner_xid, p.token = p.token, None
            try:
                assert p.owner_xid is not None
                _dbos.park_execute(mine, p.owner_xid)
            except Exception as exc:
                self._retry([(wf, p)], exc)
                continue
            self.resumed_total += 1

    def _retry(self, waits: list[tuple[str, _Parked]], exc: Exception) -> None:
        """Park these again, to be resumed after ``RETRY_SEC`` (the database was away)."""
        for wf, p in waits:
            log.warning(
                "parked session not resumed yet",
                extra={"event": "park.retry", "workflow_id": wf, "error": str(exc)},
            )
            with self._lock:
                self._parked[wf] = p
                self._push(time.time() + RETRY_SEC, wf, p)
            _dbos.park_replace_waiters(wf, p.topic, p.wake)
