"""``python -m dbos_agents.cli`` (what the crash harness and tests run)."""

from . import main

main()
