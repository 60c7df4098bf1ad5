"""An interrupt during the wait a provider asked for (``retry-after``) ends the run at
once: the worker does not sit out the provider's minute first. A module of its own: the
module-scoped database of tests/anthropic/test_retry.py has a worker of its own."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from dbos_agents.testing import CrashHarness
from dbos_agents.testing.fake_anthropic import serve_fake_anthropic

from ..delta_log import delta_rows, shown_text
from .test_retry import ANSWER, REPO

pytestmark = pytest.mark.integration
WAIT_SEC = 8
"""The provider's wait: under the 60 s cap, so a run that sits it out asks again."""


def test_an_interrupt_does_not_wait_out_the_retry_after(
    fresh_database_url: str, tmp_path: Path
) -> None:
    with serve_fake_anthropic() as fake:
        fake.push_error(529, "Overloaded", type="overloaded_error", retry_after=WAIT_SEC)
        fake.push_text(ANSWER)
        with CrashHarness(
            "tests.anthropic.stream_app:runtime",
            fresh_database_url,
            env={"FAKE_ANTHROPIC_URL": fake.base_url},
            executor_id="anthropic-retry-interrupt",
            log_dir=tmp_path,
            cwd=REPO,
        ) as h:
            worker = h.start_worker()
            try:
                sid = h.client.start("writer", "where is A-42?")
                while not fake.requests:
                    time.sleep(0.05)
                h.client.interrupt(sid)
                info = h.client.wait(sid, timeout=30)
                time.sleep(
                    max(0.0, fake.requests[0]["received_at"] + WAIT_SEC + 3 - time.monotonic())
                )
            finally:
                worker.stop()
            rows = delta_rows(h.database_url, sid)
        assert info.status == "interrupted", worker.log()[-3000:]
        # A run that sat out the wait would ask the model again when it is over.
        assert len(fake.requests) == 1 and fake.pending == 1, "the model was asked again"
        assert shown_text(rows) == ""
