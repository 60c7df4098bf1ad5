"""What one execution of a session workflow knows about itself, in a context variable.

**Fresh steps.** A workflow's steps run in order, and a step is checkpointed before the next
one starts. So once any step body of this execution has run (rather than replayed its
checkpoint), every later step is running for the first time ever: no earlier execution got
that far, or this one would have replayed the step that ran. The model turn uses that to
skip its "was this turn recorded by an earlier execution?" read, and a server tool's
operation its "was this call recorded?" read, in the common case. (A "checkpoint" here is
DBOS's row or our own: the turn's rows, a call's result row, each committed before the
next operation starts.) An execution resuming a parked wait knows the same of every turn
past those its begin read (``turn_is_new``).

**Its identity.** An execution's live pieces are fenced on it (``writer``): the workflow
and the ownership token DBOS wrote when this execution claimed it. A stale execution (its
worker adopted while alive) has them refused by Postgres.

The state is one mutable cell per workflow execution, set on entry by the workflow; steps
(and the concurrent tool calls' tasks, which copy the context) see the same cell.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field

from dbos import DBOS

from .. import _dbos
from ..store.fence import Writer
from .context import get_context
from .ledger import TurnRecord


@dataclass
class _Execution:
    ran: bool = False
    resumed: bool = False
    turns: dict[tuple[int, int], TurnRecord] = field(default_factory=dict)
    """(run, turn) -> the turn's recorded output, read ahead by a resumed run's begin."""
    recorded_upto: dict[int, int] = field(default_factory=dict)
    """run -> its last turn recorded when this execution's begin read them (-1: none)."""
    writer: Writer | None = None


_current: ContextVar[_Execution | None] = ContextVar("dbos_agents_execution", default=None)


def begin_execution(*, resumed: bool = False) -> None:
    """Called first thing by the workflow body: nothing has run in this execution yet;
    ``resumed``: it re-executes a parked wait (``parking``), so it replays up to there."""
    _current.set(_Execution(resumed=resumed))


def step_ran() -> None:
    """Called by a step body that runs (a replayed step's body never does)."""
    cell = _current.get()
    if cell is not None:
        cell.ran = True


def later_steps_are_new() -> bool:
    """True once a step body ran in this execution (see the module doc)."""
    cell = _current.get()
    return cell is not None and cell.ran


def replay_likely() -> bool:
    """True while this execution, resuming a parked wait, has run no step body yet: what it
    does next most likely replays (a hint: a persistent session's next run after a parked
    inbox wait is new, so the caller checks)."""
    cell = _current.get()
    return cell is not None and cell.resumed and not cell.ran


def read_ahead(run_seq: int, turns: dict[int, TurnRecord]) -> None:
    """The turns of run ``run_seq`` an earlier execution recorded, read by this one's
    begin: the model turn replays them without reading each (``recorded_turn``). Only the
    owning execution records a turn, and this one owns the workflow, so the set is final
    for every turn below the first one missing."""
    cell = _current.get()
    if cell is not None:
        cell.turns.update({(run_seq, t): out for t, out in turns.items()})
        cell.recorded_upto[run_seq] = max(turns, default=-1)


def turn_is_new(run_seq: int, turn: int) -> bool:
    """True when this execution's begin read the run's recorded turns (``read_ahead``) and
    ``turn`` comes after them: nobody recorded it, since only the owning execution records
    a turn and this one owned the workflow before its begin read. A resumed run's first
    new turn then needs no "was it recorded?" read, as in an execution whose step ran."""
    cell = _current.get()
    return cell is not None and turn > cell.recorded_upto.get(run_seq, turn)


def peek_turn(run_seq: int, turn: int) -> TurnRecord | None:
    """A turn read ahead, left for ``recorded_turn`` (the run's MCP tool lists, before it)."""
    cell = _current.get()
    return None if cell is None else cell.turns.get((run_seq, turn))


def recorded_turn(run_seq: int, turn: int) -> TurnRecord | None:
    """A turn's output read ahead (``read_ahead``), once; None: read it as usual."""
    cell = _current.get()
    return None if cell is None else cell.turns.pop((run_seq, turn), None)


def writer() -> Writer | None:
    """This execution as the writer of its session's live pieces (see the module doc);
    None outside a workflow (nothing to fence on). Call it in the workflow's context."""
    cell = _current.get()
    if cell is not None and cell.writer is not None:
        return cell.writer
    wf = DBOS.workflow_id
    token = None if wf is None else _dbos.owner_token(wf)
    if wf is None or token is None:
        return None
    schema = _dbos.quoted(get_context().settings.dbos_system_schema)
    found = Writer(workflow_id=wf, token=token, system_schema=schema)
    if cell is not None:
        cell.writer = found
    return found
