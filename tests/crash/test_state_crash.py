"""Typed state across SIGKILLs: a tool's state change commits with its recorded result in
one transaction, so a worker killed between the tool's effect and its result leaves
neither (then, like the result, the change is settled by the recovery's rules: a
durability error stores nothing, a re-run or ``verify`` stores it once), and a worker
killed after the result leaves both, replayed without applying the change twice."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from dbos_agents.testing import CrashHarness, Witness

pytestmark = [pytest.mark.integration, pytest.mark.crash]

REPO = Path(__file__).resolve().parents[2]

# point -> {tool: (effects, result kind, state versions stored)}
CASES: dict[str, dict[str, tuple[int, str, int]]] = {
    # dispatched, the handler never ran: nothing happened, nothing stored
    "after_dispatch_mark": {
        "stock": (0, "tool-durability-error", 0),
        "peek": (1, "ok", 1),
        "restock": (1, "ok", 1),
    },
    # the effect happened and the worker died before the result (and its change)
    # committed: neither was stored; recovery settles both together
    "after_handler": {
        "stock": (1, "tool-durability-error", 0),
        "peek": (2, "ok", 1),
        "restock": (1, "verified", 1),
    },
    # result and change committed together: replayed, the change not applied again
    "after_tool_result": {
        "stock": (1, "ok", 1),
        "peek": (1, "ok", 1),
        "restock": (1, "ok", 1),
    },
}


@pytest.fixture(scope="module")
def harness(
    fresh_database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CrashHarness]:
    logs = tmp_path_factory.mktemp("state-crash-logs")
    with CrashHarness(
        "tests.crash.state_app:runtime", fresh_database_url, log_dir=logs, cwd=REPO
    ) as h:
        yield h


def _states(h: CrashHarness, session_id: str) -> list[sa.Row]:  # type: ignore[type-arg]
    with h.client.engine.connect() as conn:
        return list(
            conn.execute(
                sa.text(
                    "SELECT version, tool_call_id, state FROM dbos_agents.session_states"
                    " WHERE session_id = :s ORDER BY version"
                ),
                {"s": session_id},
            )
        )


PARAMS = [(p, t) for p in CASES for t in ("stock", "peek", "restock")]


@pytest.mark.parametrize(("point", "tool"), PARAMS, ids=[f"{p}-{t}" for p, t in PARAMS])
def test_a_state_change_and_its_result_commit_together(
    harness: CrashHarness, tmp_path: Path, point: str, tool: str
) -> None:
    harness.witness = tmp_path / "witness.jsonl"
    witness = Witness(harness.witness)
    drill = harness.drill("stateful", tool, crash_at=point)
    assert drill.crashed, f"{point} never reached:\n{drill.logs[0][-3000:]}"
    assert drill.session.status == "completed", drill.logs[1][-3000:]

    effects, kind, versions = CASES[point][tool]
    assert witness.count("effect", tool=tool) == effects
    (ledger,) = drill.tool_calls
    (tool_msg,) = [m for m in drill.history if m.role == "tool"]
    body = tool_msg.content or ""
    verified = isinstance(ledger.result, dict) and bool(ledger.result.get("verified"))
    if kind == "ok":
        assert ledger.status == "completed" and not verified
    elif kind == "verified":
        assert ledger.status == "completed" and verified
    else:
        assert json.loads(body)["error"]["kind"] == kind and ledger.status == "failed"

    # The state: one version exactly when the call's result is a success, never two.
    rows = _states(harness, drill.session_id)
    assert len(rows) == versions
    if versions:
        assert rows[0].tool_call_id == ledger.tool_call_id
        assert rows[0].state == {"count": 1, "notes": [tool]}
    assert harness.client.state(drill.session_id) == (rows[-1].state if rows else None)

    # The model's next turn saw the state as committed (instructions are a function of it).
    seen = [e["instructions"] for e in witness.events("model") if e["turn"] == 1]
    assert seen == [f"count={versions}"]
