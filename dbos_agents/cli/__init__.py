"""The ``dbos-agents`` command line: a thin shell over ``AgentClient``, the worker and the
HTTP server. Every command works on the embedded Postgres when no database is configured,
takes ``--json``, and reports errors as one line with a code and a documented exit status
(``docs/cli.md``; ``--debug`` or ``DBOS_AGENTS_DEBUG=1`` adds the traceback).

Modules: ``base`` (errors, exit codes, database resolution, progress), ``ops`` (migrate,
worker, serve, demo), ``operator`` (submit, fail, pending, interrupt), ``sessions`` (start,
send, sessions, show, follow), ``db`` (the embedded Postgres: url, start, stop, status), ``mcp_tools`` (``mcp tools``),
``follow`` and ``render``.
"""

from __future__ import annotations

from . import db, forks, mcp_tools, operator, ops, sessions  # noqa: F401  (they register their commands)
from .base import EXIT_CODES, app


def main() -> None:
    """The ``dbos-agents`` entry point."""
    app()


__all__ = ["EXIT_CODES", "app", "main"]
