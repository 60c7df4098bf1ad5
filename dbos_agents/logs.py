"""How a ``dbos-agents`` process logs: one line per record, rich on a terminal, plain in a
file, JSON on request (``dbos-agents worker --log-format json``).

A library does not configure logging; the CLI does (``configure`` for a worker,
``configure_cli`` for the short commands). The worker logs one INFO line when a session's
run starts, waits and ends, and WARNING and above for what needs a look. Expected
conditions are never an ERROR with a traceback: DBOS's own report of a workflow cancelled
by an interrupt becomes one INFO line (``DbosNoise``), and a database outage is two lines,
not a thousand (``outages``).
"""

from __future__ import annotations

import json
import logging
import sys
from collections import OrderedDict
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from .outages import OutageFilter

if TYPE_CHECKING:
    from .outcome import RunOutcome, RunSpec

log = logging.getLogger("dbos_agents")

LogFormat = Literal["text", "json"]
FORMATS: tuple[LogFormat, ...] = ("text", "json")

_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "taskName"}
_DBOS_EXTRAS = frozenset(
    {"applicationID", "applicationVersion", "executorID", "operationUUID", "traceId"}
)
TEMPLATES: dict[str, str] = {
    "client_tool.suspended": "session {session_id} waits for {tool} ({kind}, call {tool_call_id})",
    "client_tool.timeout": "session {session_id}: call {tool_call_id} timed out",
    "client_tool.aborted": "call {tool_call_id} cancelled by an interrupt",
    "client_tool.submitted": "session {session_id}: call {tool_call_id} answered ({kind})",
    "client_tool.late_answer": "call {tool_call_id} answered after its timeout (kept, not used)",
    "client_tool.submit_unknown": "session {session_id}: call {tool_call_id} not open ({reason})",
    "client_tool.validation_failed": "call {tool_call_id}: the result fails the tool's schema",
}
"""Lines for records whose message is only their event name."""


def run_started(spec: RunSpec, resumed: bool = False) -> None:
    """A run of a session begins (or resumes, replaying) in this worker: one INFO line."""
    sid, seq = spec["session_id"], spec["run_seq"]
    log.info(
        f"session {sid} run {seq} {'resumed' if resumed else 'started'} (agent {spec['agent']})",
        extra={
            "event": "run_started",
            "session_id": sid,
            "run_seq": seq,
            "agent": spec["agent"],
            "resumed": resumed,
        },
    )


def run_handed_back(spec: RunSpec, queue: str, moved: bool) -> None:
    """A run reached a worker that lacks its agent and went back to its agent's queue."""
    sid, seq = spec["session_id"], spec["run_seq"]
    where = f"back on queue {queue}" if moved else "left alone (no longer this worker's)"
    log.info(
        f"session {sid} run {seq}: agent {spec['agent']} does not run here; {where}",
        extra={
            "event": "run_handed_back",
            "session_id": sid,
            "run_seq": seq,
            "agent": spec["agent"],
            "queue": queue,
            "moved": moved,
        },
    )


_ENDED: OrderedDict[tuple[str, int], None] = OrderedDict()
"""Runs whose end this process logged lately: DBOS's own record of an interrupted run's
cancellation (which can come after, when the run ended first) then adds nothing."""


def run_ended(outcome: RunOutcome) -> None:
    """A run ended: one line, INFO unless it failed (WARNING, with the error)."""
    sid, seq, status = outcome.session_id, outcome.run_seq, outcome.status
    _ENDED[(sid, seq)] = None
    while len(_ENDED) > 1000:
        _ENDED.popitem(last=False)
    failed = status == "failed"
    log.log(
        logging.WARNING if failed else logging.INFO,
        f"session {sid} run {seq} {status} after {outcome.turns} turn(s)"
        + (f": {outcome.error}" if failed and outcome.error else ""),
        extra={
            "event": "run_ended",
            "session_id": sid,
            "run_seq": seq,
            "status": status,
            "turns": outcome.turns,
        },
    )


def extras(record: logging.LogRecord) -> dict[str, Any]:
    """The fields a record carries beyond logging's own (``extra=``)."""
    return {
        k: v
        for k, v in record.__dict__.items()
        if k not in _STANDARD and k not in _DBOS_EXTRAS and not k.startswith("_")
    }


def message(record: logging.LogRecord) -> str:
    """The record's line: a template for a bare event name, the error after a colon."""
    text = record.getMessage()
    fields = extras(record)
    event = fields.get("event")
    if text == event and isinstance(event, str):
        template = TEMPLATES.get(event)
        if template is not None:
            try:
                return template.format_map(fields)
            except (KeyError, ValueError):
                pass
        rest = " ".join(f"{k}={v}" for k, v in fields.items() if k != "event")
        return f"{text} {rest}".rstrip()
    error = fields.get("error")
    if error and str(error) not in text:
        text = f"{text}: {error}"
    return text


class TextFormatter(logging.Formatter):
    """``2026-01-02 03:04:05 INFO    <line>``; a traceback only for a real error."""

    def __init__(self, with_time: bool = True) -> None:
        super().__init__(
            "%(asctime)s %(levelname)-7s %(message)s" if with_time else "%(message)s",
            datefmt="%Y-%m-%d %H:%M:%S",
        )

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = message(record)
        return super().formatMessage(record)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and every extra field."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": message(record),
        }
        workflow = getattr(record, "operationUUID", None)
        if workflow:
            doc["workflow_id"] = workflow
        doc.update(extras(record))
        if record.exc_info:
            doc["traceback"] = self.formatException(record.exc_info)
        return json.dumps(doc, default=str)


_NOT_OWNED = (
    "is no longer owned by this execution. Waiting for the owner's recorded outcome",
    "the workflow is no longer owned by this execution. Waiting for the recorded outcome",
)
"""DBOS's two wordings of "an interrupt took the workflow from this execution"."""


class DbosNoise(logging.Filter):
    """DBOS's records of what an interrupt does, told as what they are.

    An interrupt cancels the session's workflow: DBOS then logs the cancellation as an
    ERROR with a 30-line traceback, after a WARNING that the execution no longer owns the
    workflow. The first becomes one INFO line, the second DEBUG (dropped at INFO)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith("dbos") or record.name.startswith("dbos_agents"):
            return True
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None and _is_cancellation(exc):
            workflow = str(
                getattr(exc, "workflow_id", None) or getattr(record, "operationUUID", "")
            )
            sid, _, seq = workflow.partition("::run::")
            if (sid, int(seq or 1)) in _ENDED:  # its end is told already
                return False
            record.msg, record.args, record.exc_info, record.exc_text = (
                f"session {sid} run {seq or 1} interrupted (its workflow was cancelled)",
                (),
                None,
                None,
            )
            record.levelno, record.levelname = logging.INFO, "INFO"
            record.event, record.session_id, record.run_seq = "run_cancelled", sid, int(seq or 1)
            return True
        if record.getMessage().endswith(_NOT_OWNED):
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return logging.getLogger("dbos_agents").isEnabledFor(logging.DEBUG)
        return True


def _is_cancellation(exc: BaseException) -> bool:
    from dbos import error

    return isinstance(
        exc, error.DBOSAwaitedWorkflowCancelledError | error.DBOSWorkflowCancelledError
    )


_HANDLER_NAME = "dbos_agents"


def _handler(fmt: LogFormat, stream: Any) -> logging.Handler:
    handler: logging.Handler
    if fmt == "json":
        handler = logging.StreamHandler(stream)
        handler.setFormatter(JsonFormatter())
    elif stream.isatty():
        from rich.console import Console
        from rich.logging import RichHandler

        handler = RichHandler(
            console=Console(file=stream),
            show_path=False,
            markup=False,
            rich_tracebacks=False,
            log_time_format="%H:%M:%S",
        )
        handler.setFormatter(TextFormatter(with_time=False))
    else:
        handler = logging.StreamHandler(stream)
        handler.setFormatter(TextFormatter())
    handler.set_name(_HANDLER_NAME)
    return handler


def configure(
    level: str = "INFO",
    fmt: LogFormat = "text",
    *,
    dbos_level: str = "WARNING",
    stream: Any = None,
) -> logging.Handler:
    """A worker's logging: one handler on stderr for our records (``level``), DBOS's
    (``dbos_level``; installed before DBOS starts, DBOS then adds no console handler of its
    own) and every other library's warnings; DBOS's noise and outages filtered. Returns
    the handler; calling it again replaces it."""
    handler = _handler(fmt, stream or sys.stderr)
    handler.addFilter(DbosNoise())
    handler.addFilter(OutageFilter())
    root, dbos_logger = logging.getLogger(), logging.getLogger("dbos")
    for lg in (root, dbos_logger):
        for old in [
            h
            for h in lg.handlers
            if h.get_name() in (_HANDLER_NAME, "__dbos_console_log_handler__")
        ]:
            lg.removeHandler(old)
        lg.addHandler(handler)
    root.setLevel(logging.WARNING)
    dbos_logger.propagate = False
    dbos_logger.setLevel(dbos_level.upper())
    logging.getLogger("dbos_agents").setLevel(level.upper())
    return handler


def configure_cli(debug: bool = False) -> None:
    """The short commands (``start``, ``submit``, ``interrupt``...): they print their own
    outcome as one line, so our records show only at ERROR (everything with ``--debug``);
    ``worker`` and ``serve`` configure their own. A process with logging of its own (the
    CLI run in-process by tests or an app) is left alone."""
    root = logging.getLogger()
    if any(h.get_name() != _HANDLER_NAME for h in root.handlers):
        return
    handler = _handler("text", sys.stderr)
    for old in [h for h in root.handlers if h.get_name() == _HANDLER_NAME]:
        root.removeHandler(old)
    root.addHandler(handler)
    logging.getLogger("dbos_agents").setLevel(logging.DEBUG if debug else logging.ERROR)
