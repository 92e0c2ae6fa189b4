"""Worker functions for the concurrency tests, importable by ``multiprocessing`` spawn.

Each worker builds its own guard on a store shared with the others (a SQLite file, or a
Redis prefix), waits at a barrier so all start together, makes identical calls, and
returns what each of its calls was decided: ``(action, detector, count)``.
"""

from __future__ import annotations

from typing import Any

from loopwatch import LoopGuard, Store

Decided = tuple[str, str | None, int]


def open_store(kind: str, where: str, prefix: str) -> Store:
    if kind == "sqlite":
        from loopwatch.stores.sqlite import SqliteStore

        return SqliteStore(where, busy_timeout_s=60)
    from loopwatch.stores import RedisStore

    return RedisStore.from_url(where, prefix=prefix, socket_timeout=30)


def identical_calls(
    guard: LoopGuard, session: str, calls: int, tag: str, tool: str = "read"
) -> list[Decided]:
    """``calls`` identical calls, each with the same result; blocked calls pass the
    blocked result on, as a host does (a no-op, SPEC §5.2)."""
    decided: list[Decided] = []
    for index in range(calls):
        call_id = f"{tag}-{index}"
        decision = guard.before_call(
            tool, {"path": "same"}, session_key=session, tool_call_id=call_id
        )
        verdict = decision.verdict
        decided.append((decision.action, verdict.detector, verdict.count))
        result = decision.tool_result if decision.tool_result is not None else "same text"
        guard.after_call(
            tool, {"path": "same"}, session_key=session, tool_call_id=call_id, result=result
        )
    return decided


def process_worker(
    kind: str,
    where: str,
    prefix: str,
    config: dict[str, Any],
    session: str,
    calls: int,
    tag: str,
    barrier: Any,
) -> list[Decided]:
    store = open_store(kind, where, prefix)
    try:
        guard = LoopGuard(config, store=store, strict=True)
        barrier.wait(timeout=60)
        return identical_calls(guard, session, calls, tag)
    finally:
        store.close()


def open_new_file(where: str, barrier: Any) -> str:
    """Open the SQLite store ``where`` (a file none has created yet) right after the other
    workers' barrier, as the hooks of parallel tool calls do: ``"ok"``, or the error."""
    from loopwatch.stores.sqlite import SqliteStore

    barrier.wait(timeout=60)
    try:
        SqliteStore(where, busy_timeout_s=30).close()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return "ok"
