"""Helpers the bench scripts share, one idea a module.

- ``cli``: argument patterns, ``--json`` output, package versions.
- ``db``: the bench databases, a connection that waits out "too many clients", one-read
  helpers (``rows``, ``scalar``).
- ``timing``: when a run finished or a tool message was recorded (read from the rows),
  waiting for a session to wait in ``recv``, a timed submit.
- ``stats``: percentiles (each script keeps the definition it always printed).
- ``procfs``: a process's RSS, threads, CPU and Postgres sockets, the host's CPU, from
  ``/proc``; ``Meter``: several processes' and a database's CPU over a window.
- ``child``: a subprocess whose stdout lines a thread reads; the worker side's signal loop.
- ``pgwatch``: what Postgres spends on one system's database (backends' CPU, transactions,
  statements, WAL) over a measured window, and the window itself (``run_window``).
- ``live``: the stamping worker and ``dbos-agents serve`` of the live benches.
- ``sse_reader``: a lean SSE reader.
- ``asker``: the agent that calls the client tool ``confirm`` and then answers.
- ``render``: rich and markdown tables, and every section of docs/benchmarks.md (a script
  run alone prints its own).
- ``labels``: row and metric labels that the scripts print and the report reads.
- ``internals``: the only place bench reaches into dbos_agents' private modules.

Scripts run as ``python bench/<script>.py``, which puts bench/ on ``sys.path``, so they
import these as ``from _lib.stats import pct``.
"""
