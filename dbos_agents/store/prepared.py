"""Writes sent as one simple query whose statements Postgres has already planned.

A script (``pg.script``) is the cheapest way to send a turn's writes on both sides of the
wire: one message, bound on the client, one implicit transaction. But Postgres parses and
plans every statement of a simple query on every call, and a turn's statements (a
subquery for the next message number, a PL/pgSQL fence, jsonb casts) cost more to plan
than to run. A pipeline of prepared statements plans once but costs the client a cursor
and a protocol round of messages per statement. This module keeps both savings: each
statement is ``PREPARE``d once per connection (its own round trip, the first time only),
and the script then sends ``EXECUTE name(literals)`` for each, which Postgres parses in
microseconds and runs with the plan it kept.

Statement texts that vary with their data (a multi-row ``VALUES``) would fill a
connection with plans used once, so a text is prepared only once it has been seen twice
in this process, and a connection holds at most ``PER_CONNECTION`` of them; anything else
runs as written. So does a statement Postgres will not prepare (a parameter whose type
only the client knows), and nothing is prepared inside a caller's transaction. A
connection whose prepared statements are gone (psycopg sends ``DEALLOCATE ALL`` with
every ``ROLLBACK`` it runs, as the pool's reset does; a pooler that resets sessions) fails
its first ``EXECUTE`` (``26000``) before anything ran, and the script is sent again.
"""

from __future__ import annotations

import functools
import hashlib
import re
import weakref
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

PER_CONNECTION = 100
"""Statements prepared per connection at most; later texts run unprepared."""

SEEN_TEXTS = 4096
"""Texts counted at most before the count starts over (texts that vary never repeat)."""

PARAM = re.compile(r"(?<![:\w]):([A-Za-z_][A-Za-z0-9_]*)")
"""A ``:name`` parameter of SQLAlchemy's style (not a ``::`` cast); ``pg.psycopg_sql`` too."""
_PLANNED = re.compile(r"\s*(SELECT|INSERT|UPDATE|DELETE|WITH)\b", re.IGNORECASE)
"""Statements ``PREPARE`` takes (``BEGIN``, ``COMMIT`` and the like run as written)."""
_seen: Counter[str] = Counter()
_refused: set[str] = set()
"""Texts Postgres would not prepare; they run as written."""
_known: weakref.WeakKeyDictionary[psycopg.AsyncConnection[Any], set[str]]
_known = weakref.WeakKeyDictionary()

MISSING_SQLSTATE = "26000"
"""invalid_sql_statement_name: an ``EXECUTE`` of a statement this session does not hold."""


@dataclass(frozen=True)
class Named:
    name: str
    prepare: str
    params: tuple[str, ...]
    """The ``:name`` parameters in the order of their ``$n``."""


@functools.lru_cache(maxsize=512)
def named(sql: str) -> Named:
    """``sql`` (``:name`` style) as a ``PREPARE`` named by its text's hash."""
    order: list[str] = []

    def positional(m: re.Match[str]) -> str:
        if m.group(1) not in order:
            order.append(m.group(1))
        return f"${order.index(m.group(1)) + 1}"

    body = PARAM.sub(positional, sql)
    name = "dbos_agents_" + hashlib.sha1(sql.encode()).hexdigest()[:20]
    return Named(name, f"PREPARE {name} AS {body}", tuple(order))


def forget(pg: psycopg.AsyncConnection[Any], exc: BaseException) -> bool:
    """After a failed script: True when it failed because the connection lost its
    statements (it is known to hold none now, and nothing of the script ran)."""
    if getattr(exc, "sqlstate", None) != MISSING_SQLSTATE:
        return False
    _known.pop(pg, None)
    return True


async def _prepare(pg: psycopg.AsyncConnection[Any], sql: str, n: Named, known: set[str]) -> bool:
    """``PREPARE`` ``sql`` (seen before) on ``pg`` if safe: only between transactions
    (a refusal must not abort a caller's), and never again once Postgres refused it (a
    parameter whose type only the client knows)."""
    if (
        sql in _refused
        or len(known) >= PER_CONNECTION
        or not _PLANNED.match(sql)
        or pg.info.transaction_status != psycopg.pq.TransactionStatus.IDLE
    ):
        return False
    try:
        await pg.execute(n.prepare)
    except psycopg.DatabaseError:
        _refused.add(sql)
        return False
    known.add(n.name)
    return True


async def query(
    pg: psycopg.AsyncConnection[Any],
    cur: psycopg.AsyncClientCursor[Any],
    stmts: Sequence[tuple[str, Mapping[str, Any]]],
    plain: Callable[[str, Mapping[str, Any]], str],
) -> str:
    """The script's text: ``EXECUTE`` for each statement prepared (or prepared now),
    ``plain(sql, params)`` (the caller's client-side binding) for the rest."""
    known = _known.setdefault(pg, set())
    parts = []
    if len(_seen) > SEEN_TEXTS:
        _seen.clear()
        _refused.clear()
    for sql, params in stmts:
        _seen[sql] += 1
        if _seen[sql] < 2:  # a text seen once may never recur: no hash, no cache entry
            parts.append(plain(sql, params))
            continue
        n = named(sql)
        if n.name not in known and not await _prepare(pg, sql, n, known):
            parts.append(plain(sql, params))
            continue
        args = ", ".join(["%s"] * len(n.params))
        execute = f"EXECUTE {n.name}({args})" if n.params else f"EXECUTE {n.name}"
        parts.append(cur.mogrify(execute, [params[k] for k in n.params]))
    return ";\n".join(parts)
