"""The stream: a session's live log between the tables (``store/``), its writer (the
loop) and its readers (the client, the server, the CLI).

- ``deltas``, ``announce``: the delta table's statements, and the worker's batch writer
  that appends pieces and announces changes after each commit;
- ``log``: one read of the log (status, messages, deltas, open waits, state versions);
- ``vocabulary``: those rows as the one event vocabulary every reader gets;
- ``listen``, ``feed``, ``watch``: the process's LISTEN connection, the new deltas handed
  to every live stream of the process, and the waits between reads;
- ``loop_reads``: the event loop's own connections for the streams' full reads;
- ``follow``: the loop every live reader runs (read, hand out, wait, read again);
- ``reducer``: what a reader holds, folded from the events, as semantic operations the
  protocols' encoders turn into their wire formats.

An import of this package runs nothing: importers name the module they need.
"""
