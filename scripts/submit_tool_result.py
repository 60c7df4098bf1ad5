#!/usr/bin/env python3
"""Operator script: submit a client-tool result, error or approval from the command line.

    python scripts/submit_tool_result.py SESSION_ID TOOL_CALL_ID --result '{"ok": true}'
    echo '{"ok": true}' | python scripts/submit_tool_result.py SESSION_ID CALL --result-file -
    python scripts/submit_tool_result.py SESSION_ID CALL --approve --reason "checked"

It is ``dbos-agents submit`` (built on ``AgentClient``), with the same exit codes:
0 accepted, 3 already_completed, 4 unknown_tool_call, 5 late_answer_after_timeout,
6 invalid result, 7 invalid request, 2 usage or configuration, 9 database unavailable
(all codes: docs/cli.md).
The database comes from --database-url or DBOS_AGENTS_DATABASE_URL.
"""

from __future__ import annotations

import sys

from dbos_agents.cli import main

if __name__ == "__main__":
    sys.argv = [sys.argv[0], "submit", *sys.argv[1:]]
    main()
