"""Row and metric labels that the scripts print and put in their JSON, and that
bench/report.py and bench/_lib/render.py look up in docs/benchmarks/results.json: one place,
so the two sides cannot drift apart."""

from __future__ import annotations

# bench/turn_overhead.py's rows
RAW = "raw DBOS: 2 async steps"
MIX = "raw DBOS: 2 steps + 2 datasource tx"
OURS = "dbos-agents: model turn + side-effecting tool call"
COMMITS = "Postgres: 3 durable commits in sequence (no DBOS)"
"""The floor of a turn that runs a side-effecting tool at most once: its record, the
dispatch mark and the result, each committed before the next step may begin."""

LANGGRAPH = "LangGraph + AsyncPostgresSaver (default durability)"
"""A row of bench/peers/langgraph_pg.py (which runs in the peers' venv and prints it)."""

# bench/submit_latency.py's metrics (ms); PRIMARY and RAW_PRIMARY are the headline rows
PRIMARY = "submit -> run finished (workflow_status.updated_at)"
TOOL_MSG = "submit -> tool message recorded (next model step began its write)"
SUBMIT_CALL = "submit call itself (client.submit_tool_result)"
CALLER_SAW = "submit -> caller saw finish (20 ms get_result poll)"
RAW_PRIMARY = "send -> workflow finished (workflow_status.updated_at)"
RAW_CALL = "send call itself (DBOSClient.send)"
RAW_CALLER_SAW = "send -> caller saw finish (local task handle)"

START_ROWS = [
    ("ours_start", "dbos-agents: runtime.start -> first model call", "ours"),
    ("ours_client_start", "dbos-agents: AgentClient.start -> first model call", "ours_client"),
    ("raw_start", "raw DBOS: start_workflow_async -> first step (no queue)", "raw"),
    ("raw_enqueue", "raw DBOS: DBOSClient.enqueue -> first step (same polling)", "raw_enqueue"),
    ("ours_result", "dbos-agents: run's end (with its event) -> result() returns", None),
    ("raw_result", "raw DBOS: last step -> get_result() returns", None),
]
"""bench/start_latency.py's rows: (sample key, label, CPU key or None)."""

# bench/concurrency.py's systems: key (its --systems name) -> label
CONCURRENCY_SYSTEMS = {
    "ours": "dbos-agents (runtime.start -> result(), in the worker)",
    "langgraph": "LangGraph + AsyncPostgresSaver (default durability, pool of 20)",
    "pydantic_ai": "Pydantic AI + DBOS (capability, tool as step)",
    "ours_streamed": "dbos-agents, replies streamed to readers in 8-character pieces",
}

# the per-turn Postgres figures (bench/_lib/pgwatch.py's window) the per-turn rows carry
PER_TURN = ("cpu_ms_per_turn", "pg_cpu_ms_per_turn", "xacts_per_turn", "stmts_per_turn",
            "wal_kb_per_turn")  # fmt: skip
