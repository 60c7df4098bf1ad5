"""The call kinds of a turn: one module each owns a kind's body, so a new kind touches one
place (``base.Kind``).

The model turn plans the calls it made (``planning.plan``: the pure checks, each call's
arguments validated once) and opens, in its own transaction, the waits the kinds ask for and the
dispatch marks of the calls that may act elsewhere (``planning.openings``). The workflow then runs
the planned calls: kinds with ``concurrent`` beside each other, the others in one sequence
(``prepare`` for each in call order, then ``run`` for each), which alone draws DBOS
operation ids, so every id is the same on replay.

| kind | pending row | dispatched when | runs as |
|---|---|---|---|
| server (``server``) | - | its attempt begins (under the call's lock) | an attempt, concurrently |
| client (``client``) | ``client`` | the wait opens | ``recv`` on the call id |
| approval (``approval``) | ``approval`` | the approved tool step begins | ``recv``, then a DBOS step |
| subagent (``subagent``) | - | the wait opens (the child is about to start) | a child workflow |
| durable (``durable``) | - | the wait opens (the child is about to start) | a child workflow |
| MCP (``server``) | - (a question: ``ctx.ask``'s) | its attempt begins | an attempt; questions: a continuation workflow |

An import of this package runs nothing: importers name the module they need
(``planning``, ``base``, ``waiting``), so the durable tool's workflow, which a call kind
starts, can import ``base`` without a cycle through here.
"""
