"""A fallback model across a SIGKILL: the worker dies right after the fallback's answer
was recorded; the recovery replays the turn from its record, asking neither model again."""

from __future__ import annotations

from pathlib import Path

import pytest

from dbos_agents.testing import CrashHarness, Witness

pytestmark = [pytest.mark.integration, pytest.mark.crash]
REPO = Path(__file__).resolve().parents[2]


def test_a_crash_after_the_fallback_answered_asks_neither_model_again(
    fresh_database_url: str, tmp_path: Path
) -> None:
    with CrashHarness(
        "tests.crash.fallback_app:runtime",
        fresh_database_url,
        witness=tmp_path / "witness.jsonl",
        log_dir=tmp_path,
        cwd=REPO,
        executor_id="fallback-worker",
    ) as h:
        drill = h.drill("resilient", "hello", crash_at="model_call")
    assert drill.crashed, drill.logs[0][-2000:]
    assert drill.session.status == "completed"
    assert drill.session.final_output == "the backup answered"
    witness = Witness(tmp_path / "witness.jsonl")
    assert witness.count("model", name="primary") == 1
    assert witness.count("model", name="backup") == 1
