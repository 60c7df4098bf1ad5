"""The worker's log lines (dbos_agents.logs, dbos_agents.outages): templates for bare event
names, JSON lines, DBOS's cancellation report as one INFO line, outages told twice."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
from dbos import error as dbos_errors

from dbos_agents import logs, outages


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    names = ("", "dbos", "dbos_agents")
    saved = [(logging.getLogger(n).level, logging.getLogger(n).propagate) for n in names]
    stream = io.StringIO()
    handler = logs.configure("INFO", "text", stream=stream)
    outages.reset()
    yield stream
    for name, (level, propagate) in zip(names, saved, strict=True):
        lg = logging.getLogger(name)
        lg.removeHandler(handler)
        lg.setLevel(level)
        lg.propagate = propagate
    outages.reset()


def _record(name: str, level: int, msg: str, **extra: object) -> logging.LogRecord:
    rec = logging.LogRecord(name, level, __file__, 1, msg, (), None)
    rec.__dict__.update(extra)
    return rec


def test_a_bare_event_name_becomes_a_sentence() -> None:
    rec = _record(
        "dbos_agents",
        logging.INFO,
        "client_tool.aborted",
        event="client_tool.aborted",
        tool_call_id="call_1",
    )
    assert logs.message(rec) == "call call_1 cancelled by an interrupt"
    odd = _record("dbos_agents", logging.INFO, "x.y", event="x.y", a=1)
    assert logs.message(odd) == "x.y a=1"
    err = _record("dbos_agents", logging.WARNING, "reaping failed", error="boom")
    assert logs.message(err) == "reaping failed: boom"


def test_json_lines_carry_the_extras() -> None:
    rec = _record("dbos_agents", logging.INFO, "hello", event="run_started", session_id="s1")
    doc = json.loads(logs.JsonFormatter().format(rec))
    assert doc["level"] == "INFO" and doc["event"] == "run_started" and doc["session_id"] == "s1"
    assert doc["message"] == "hello" and doc["logger"] == "dbos_agents"


def test_dbos_cancellation_report_is_one_info_line(captured: io.StringIO) -> None:
    try:
        raise dbos_errors.DBOSAwaitedWorkflowCancelledError("ses_1::run::2")
    except Exception as exc:
        logging.getLogger("dbos").error(
            "Exception encountered in asynchronous workflow:", exc_info=exc
        )
    logging.getLogger("dbos").warning(
        "Workflow ses_1 is no longer owned by this execution. Waiting for the owner's recorded outcome"
    )
    lines = captured.getvalue().splitlines()
    assert len(lines) == 1, lines
    assert "INFO" in lines[0] and "session ses_1 run 2 interrupted" in lines[0]


def test_an_outage_is_announced_once_and_its_end_once(captured: io.StringIO) -> None:
    dbos = logging.getLogger("dbos")
    for _ in range(50):
        dbos.warning("Exception listing queues: (psycopg.OperationalError) connection failed: x")
        logging.getLogger("dbos_agents").warning(
            "heartbeat failed", extra={"error": "Connection refused"}
        )
    assert captured.getvalue() == ""  # suspected only: the probe decides
    outages.failed(OSError("connection failed: Connection refused"))
    outages.failed(OSError("connection failed: Connection refused"))
    dbos.warning("Notification listener error: server closed the connection unexpectedly")
    outages.answered()
    outages.answered()
    lines = captured.getvalue().splitlines()
    assert len(lines) == 2, lines
    assert "database unreachable" in lines[0] and "connection failed: x" in lines[0]
    assert "database answers again" in lines[1] and "(102 connection errors not shown)" in lines[1]


def test_a_one_off_broken_connection_is_no_outage(captured: io.StringIO) -> None:
    logging.getLogger("dbos").warning("error: server closed the connection unexpectedly")
    outages.answered()  # the probe got through: a pooled connection had died, nothing more
    outages.answered()
    assert captured.getvalue() == "" and not outages.down()


def test_other_warnings_and_our_errors_pass(captured: io.StringIO) -> None:
    logging.getLogger("dbos").warning("something else")
    logging.getLogger("dbos_agents").error("run failed", extra={"error": "connection refused"})
    lines = captured.getvalue().splitlines()
    assert len(lines) == 2 and "something else" in lines[0] and "run failed" in lines[1]


def test_dbos_logs_at_the_higher_of_its_level_and_ours() -> None:
    from dbos_agents.settings import Settings

    assert Settings(log_level="INFO", dbos_log_level="WARNING").dbos_level() == "WARNING"
    assert Settings(log_level="ERROR").dbos_level() == "ERROR"  # quiets both, as before
    assert Settings(log_level="DEBUG", dbos_log_level="DEBUG").dbos_level() == "DEBUG"
