"""A small run of ``bench/chat_ui.py`` (worker, ``dbos-agents serve`` and the AI SDK's
client in Node, three processes, and its floor): every chat ends with exactly the stamped
pieces once each, and every figure the report needs is measured. The figures are printed, never
asserted: tests do not assert on wall-clock time."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration]
REPO = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(600)
def test_a_small_chat_ui_run_shows_every_piece_once_and_measures_each_figure(
    pg_server: str,
) -> None:
    if shutil.which("node") is None:
        pytest.fail("Node is not installed (bench/chat_ui.py runs the official AI SDK)")
    if not (REPO / "js" / "node_modules" / "ai").is_dir():
        pytest.fail("the JS clients are not installed: run `npm ci --prefix js`")
    proc = subprocess.run(
        [
            *(sys.executable, str(REPO / "bench" / "chat_ui.py"), "--json"),
            *("--server-url", pg_server, "--db-name", f"dbos_agents_t_chat_ui_{os.getpid()}"),
            *("--chats", "1,3", "--rounds", "1", "--pieces", "5", "--pace-ms", "10"),
            *("--lead-ms", "300", "--jitter-ms", "0", "--spread-ms", "0", "--timeout", "60"),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    print(proc.stderr[-4000:])  # the bench's tables, shown with -s
    rows = json.loads(proc.stdout.strip().splitlines()[-1])["rows"]
    assert [r["chats"] for r in rows] == [1, 3]
    for r in rows:
        assert r["chats_reported"] == r["chats"], r
        assert r["chats_with_wrong_text"] == 0, r["errors"]
        assert r["pieces"] == 5 * r["chats"]
        for key in (
            "first_token_p50_ms",
            "round_trip_p50_ms",
            "round_trip_post_p50_ms",
            "round_trip_resume_p50_ms",
            "round_trip_deliver_p50_ms",
        ):
            assert r[key] is not None, key
            assert r[f"floor_{key}"] is not None, f"floor_{key}"
        # The floor (the same client against a server with no database) is held to the
        # same text: a floor that streamed something else would measure something else.
        assert r["floor_chats_with_wrong_text"] == 0, r["floor_errors"]
