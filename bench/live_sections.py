"""Sections of docs/benchmarks.md for what users see live: streams (bench/streaming.py)
and chat UIs (bench/chat_ui.py). Like bench/sections.py, each function turns one
benchmark's JSON into markdown lines."""

from __future__ import annotations

from typing import Any

from _lib.tables import md_table as table
from _lib.tables import ratio
from sections import met


def streaming_section(
    res: dict[str, Any] | None, workers: dict[str, Any] | None = None
) -> list[str]:
    """bench/streaming.py: adapter -> SSE reader latency, and streaming's cost per turn;
    ``workers``: the latency again with ``serve --workers 2`` (the largest N only)."""
    out = ["## Live streams", ""]
    if res is None:
        return [*out, "Not measured in this run (`python bench/streaming.py`).", ""]
    lat, turns = res["latency"], res["per_turn"]
    more = [
        {**r, "label": f"dbos-agents, serve --workers {r['server_workers']}"}
        for r in (workers or {}).get("latency", [])
    ]
    big_rounds = max((r.get("rounds", 1) for r in lat if not r.get("label")), default=1)
    out += [
        "`bench/streaming.py`: a worker whose model stamps each piece as it leaves the adapter"
        " (one piece every 50 ms per reply), `dbos-agents serve` and the readers, in three"
        " processes on one database; N sessions start at once over HTTP and N readers follow"
        " `GET /sessions/{id}/events`. Latency is the reader's clock at arrival minus the"
        " stamp. Every piece must arrive exactly once (the last column counts sessions where"
        " it did not). The floors, at the largest N, started as spread as our sessions were"
        " and read by the same readers: the SSE stack alone (pieces stamped in a bare"
        " uvicorn + Starlette + sse-starlette server), and the same fed by `pg_notify`"
        " batches from a producer process at our worker's flush interval"
        " (bench/streaming_floor.py)."
        + (
            " The largest N again with two server processes (`dbos-agents serve --workers 2`),"
            " the worker still one."
            if more
            else ""
        )
        + (
            f" Each N of ours ran {big_rounds} rounds (fresh sessions each), their pieces"
            " pooled; the goals list each round's p99 too, and CPU is per round."
            if big_rounds > 1
            else ""
        ),
        "",
        table(
            (
                "system",
                "streams",
                "pieces",
                "p50 ms",
                "p90 ms",
                "p99 ms",
                "max ms",
                "wrong counts",
                "server CPU s",
            ),
            [
                (
                    r.get("label", "dbos-agents"),
                    str(r["streams"]),
                    str(r["pieces"]),
                    *(f"{r[k]:.1f}" for k in ("p50_ms", "p90_ms", "p99_ms", "max_ms")),
                    str(r["sessions_with_wrong_count"]),
                    f"{r['server_cpu_s']:.2f}",
                )
                for r in [*lat, *more]
            ],
        ),
        "",
        f"Per turn: sequential sessions of {turns['turns']} tool turns and an answer,"
        " `ScriptedModel` streaming 8-character pieces with no model latency (the worst case"
        " for the overhead), sessions alternating streaming on and off; medians of"
        f" {len(turns['rounds_on_ms'])} rounds.",
        "",
    ]
    off = turns["off_ms"]
    rows = [
        ("dbos-agents, streaming off", f"{off:.2f}", "1.00x", "0", "-"),
        ("dbos-agents, streaming on", f"{turns['on_ms']:.2f}", f"{turns['on_ms'] / off:.2f}x",
         f"{turns['rows_per_turn']:.1f}", f"{turns['batches_per_turn']:.2f}"),
    ]  # fmt: skip
    lg = turns.get("langgraph_stream")
    if lg:
        ms = lg["ms_per_turn_median"]
        rows.append(("LangGraph + AsyncPostgresSaver, streaming", f"{ms:.2f}", "", "-", "-"))
    out += [
        table(
            ("system", "ms per turn", "x streaming off", "delta rows/turn", "batches/turn"), rows
        ),
        "",
    ]
    big = max((r for r in lat if not r.get("label")), key=lambda r: r["streams"])
    goals = [
        (f"adapter -> reader p50, {big['streams']} streams", f"{big['p50_ms']:.1f} ms",
         "<= 10 ms", met(big["p50_ms"] <= 10)),
        (f"adapter -> reader p99, {big['streams']} streams{_per_round(big)}",
         f"{big['p99_ms']:.1f} ms", "<= 50 ms", met(big["p99_ms"] <= 50)),
        ("per turn, streaming on / off", f"{turns['on_ms'] / off:.2f}x", "<= 1.2x",
         met(turns["on_ms"] / off <= 1.2)),
    ]  # fmt: skip
    for r in more:
        goals.append((f"adapter -> reader p50 / p99, {r['streams']} streams, {r['server_workers']}"
                      f" server processes{_per_round(r)}", f"{r['p50_ms']:.1f} / {r['p99_ms']:.1f} ms",
                      "<= 10 / <= 50 ms", met(r["p50_ms"] <= 10 and r["p99_ms"] <= 50)))  # fmt: skip
    for r in lat:
        if r.get("label", "").startswith("floor: +"):
            goals.append((f"{r['label']}, p50 / p99", f"{r['p50_ms']:.1f} / {r['p99_ms']:.1f} ms",
                          "reported", ""))  # fmt: skip
    if lg:
        goals.append(("per turn, ours / LangGraph, both streaming",
                      f"{turns['on_ms'] / lg['ms_per_turn_median']:.2f}x", "reported", ""))  # fmt: skip
    return [*out, table(("figure", "value", "goal", "met"), goals), ""]


def _per_round(r: dict[str, Any]) -> str:
    """A pooled row's rounds and each round's p99, for the goal's label."""
    if r.get("rounds", 1) <= 1:
        return ""
    each = " / ".join(f"{x:.0f}" for x in r["round_p99_ms"])
    return f" ({r['rounds']} rounds pooled; p99 per round {each} ms)"


GOAL_CHATS = 100
"""Issue 28's chat-UI goals are set for this many chats at once on one worker; a smaller
largest N is shown but not judged."""


def chat_ui_section(res: dict[str, Any] | None, workers: dict[str, Any] | None = None) -> list[str]:
    """bench/chat_ui.py: the AI SDK's client (AbstractChat + DefaultChatTransport) with N
    chats at once: first token after the model's first delta, a client tool's round trip;
    ``workers``: the same with ``dbos-agents serve --workers 2``."""
    out = ["## Chat UIs (AI SDK)", ""]
    if res is None:
        return [*out, "Not measured in this run (`python bench/chat_ui.py`).", ""]
    a = res["args"]
    runs = [r for r in (res, workers) if r is not None]
    rows = [row for run in runs for row in run["rows"]]

    def ms(x: float | None) -> str:
        return "-" if x is None else f"{x:.1f}"

    keys = ("first_token_p50_ms", "first_token_p99_ms", "round_trip_p50_ms", "round_trip_p99_ms",
            "round_trip_post_p50_ms", "round_trip_resume_p50_ms", "round_trip_deliver_p50_ms")  # fmt: skip
    body: list[tuple[str, ...]] = [
        (str(r["chats"]), str(r.get("server_workers", 1)), *(ms(r[k]) for k in keys),
         str(r["chats_with_wrong_text"])) for r in rows
    ]  # fmt: skip
    header: tuple[str, ...] = (
        "chats", "server processes", "first token p50 ms", "p99 ms", "round trip p50 ms", "p99 ms",
        "tool -> POST", "POST -> piece", "piece -> client", "wrong text",
    )  # fmt: skip
    floored = any("floor_first_token_p50_ms" in r for r in rows)
    if floored:  # results from before the floor have no floor_* keys: "-"
        header += ("floor: first token p50 / p99", "floor: round trip p50 / p99",
                   "ours / floor: first token, round trip")  # fmt: skip
        body = [(*b, *_floor_cells(r)) for b, r in zip(body, rows, strict=True)]
    out += [
        "`bench/chat_ui.py`: a worker whose model stamps each piece as it leaves the adapter,"
        " `dbos-agents serve` (session tokens; one process, then `--workers 2`) and one Node"
        " process running the official"
        " `AbstractChat` + `DefaultChatTransport` (what `useChat` runs), on one database. For"
        f" each N, {a['rounds']} round(s) of: N chats with `stamp` at once ({a['pieces']}"
        f" pieces, one every {a['pace_ms']:g} ms, after {a['lead_ms']:g} ms), then N chats with"
        " `asker` (a client tool answered by `onToolCall` + `addToolOutput`, posted by"
        " `sendAutomaticallyWhen`, then a streamed answer); each chat starts within"
        f" {a['spread_ms']:g} ms of its phase. First token: the first `text-delta`'s arrival"
        " at the client minus its stamp. Round trip: `onToolCall` -> the answer's first"
        " `text-delta`. Wrong text counts chats whose text is not exactly the stamped pieces"
        " once each. See docs/bench-notes/chat_ui.md."
        + (" Floor: the same Node client and options, just before ours at each N, against"
           " `bench/chat_ui_floor.py`, a server with no database that streams the same parts"
           " (HTTP, SSE and the AI SDK on this host, without us)." if floored else ""),
        "",
        table(header, body),
        "",
    ]  # fmt: skip
    n = max(r["chats"] for r in rows)

    def judged(x: float | None, goal: float) -> str:
        if n < GOAL_CHATS:
            return f"n/a ({n} chats)"
        return met(x is not None and x <= goal)

    goals = []
    for r in rows:
        if r["chats"] != n:
            continue
        ft, rt, w = r["first_token_p50_ms"], r["round_trip_p50_ms"], r.get("server_workers", 1)
        goals += [
            (f"first token p50, {n} chats, {w} server process(es)", f"{ms(ft)} ms", "<= 15 ms",
             judged(ft, 15)),
            (f"client-tool round trip p50, {n} chats, {w} server process(es)", f"{ms(rt)} ms",
             "<= 30 ms", judged(rt, 30)),
        ]  # fmt: skip
    wrong = sum(r["chats_with_wrong_text"] for r in rows)
    goals.append(("chats with wrong text (every N)", str(wrong), "0", met(wrong == 0)))
    if floored:
        wrong = sum(r.get("floor_chats_with_wrong_text", 0) for r in rows)
        goals.append(("chats with wrong text, floor (every N)", str(wrong), "0", met(wrong == 0)))
    return [*out, table(("figure", "value", "goal", "met"), goals), ""]


def _floor_cells(r: dict[str, Any]) -> tuple[str, str, str]:
    """A chat-UI row's floor columns: first token and round trip p50 / p99, ours / floor."""
    if "floor_first_token_p50_ms" not in r:
        return "-", "-", "-"

    def pair(key: str) -> str:
        p50, p99 = r[f"floor_{key}_p50_ms"], r[f"floor_{key}_p99_ms"]
        return "-" if p50 is None else f"{p50:.1f} / {p99:.1f}"

    def of(key: str) -> str:
        return ratio(r[f"{key}_p50_ms"], r[f"floor_{key}_p50_ms"])

    return pair("first_token"), pair("round_trip"), f"{of('first_token')}, {of('round_trip')}"
