"""The API of ``loopwatch serve``: requests in, guard calls on one worker thread, replies out.

The wire format and every operation are documented in ``docs/serve.md``. Kept apart from
:mod:`loopwatch.serve` (the client and the constants) so that a hook process asking a running
server never imports this, nor the guard behind it.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from loopwatch.serve import (
    E_BAD_JSON,
    E_BAD_REQUEST,
    E_INTERNAL,
    E_MISMATCH,
    E_UNAVAILABLE,
    E_UNKNOWN_OP,
    MSG_BAD_JSON,
    MSG_BAD_UTF8,
    MSG_FIELD_OPTIONAL,
    MSG_FIELD_STRING,
    MSG_INTERNAL,
    MSG_MISMATCH,
    MSG_NO_HOOKS,
    MSG_NO_OP,
    MSG_NOT_OBJECT,
    MSG_OPTIONS,
    MSG_PAYLOAD,
    MSG_TOO_DEEP,
    MSG_UNKNOWN_AGENT,
    MSG_UNKNOWN_OP,
    OPS,
    ServeError,
)

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

    from loopwatch.core.records import ToolCallRecord
    from loopwatch.guard import Decision, LoopGuard

logger = logging.getLogger("loopwatch.serve")


def _text_field(message: Mapping[str, Any], field: str) -> str:
    value = message.get(field)
    if not isinstance(value, str) or not value.strip():
        raise ServeError(E_BAD_REQUEST, MSG_FIELD_STRING.format(field=field))
    return value


def _optional_field(message: Mapping[str, Any], field: str) -> str | None:
    value = message.get(field)
    if value is not None and not isinstance(value, str):
        raise ServeError(E_BAD_REQUEST, MSG_FIELD_OPTIONAL.format(field=field))
    return value


def _verdict_json(decision: Decision) -> dict[str, Any]:
    verdict = decision.verdict
    return {
        "stuck": verdict.stuck,
        "level": verdict.level,
        "detector": verdict.detector,
        "count": verdict.count,
        "message": verdict.message,
        "warning_key": verdict.warning_key,
        "paired_tool_name": verdict.paired_tool_name,
    }


def decision_json(decision: Decision) -> dict[str, Any]:
    """A :class:`~loopwatch.Decision` as the API's ``before_call`` result."""
    return {
        "action": decision.action,
        "blocked": decision.tool_result is not None,
        "enforced": decision.enforced,
        "emitted": decision.emitted,
        "tool_result": decision.tool_result,
        "verdict": _verdict_json(decision),
    }


def record_json(record: ToolCallRecord | None) -> dict[str, Any] | None:
    """A history record as JSON: names, ids and digests only (never raw arguments)."""
    if record is None:
        return None
    return {
        "tool_name": record.tool_name,
        "args_hash": record.args_hash,
        "result_hash": record.result_hash,
        "tool_call_id": record.tool_call_id,
        "run_id": record.run_id,
        "unknown_tool_name": record.unknown_tool_name,
        "timestamp": record.timestamp,
    }


class Dispatcher:
    """Turns API requests into guard calls on one worker thread; never raises.

    Args:
        guard_factory: builds the guard; called once, on the worker thread, so that a store
            bound to its creating thread (``sqlite3``) is only ever used there.
        hooks_module: the module providing ``run_hook`` and ``AGENTS`` (default: import
            ``loopwatch.hooks`` on first use).
        options: the server's own :func:`hook_options`; a ``hook`` request carrying other
            ones is refused (``mismatch``). ``None`` accepts every hook.

    Raises:
        Exception: whatever ``guard_factory`` raises (a bad config is a start-up error).
    """

    def __init__(
        self,
        guard_factory: Callable[[], LoopGuard],
        hooks_module: Any = None,
        options: Mapping[str, str | None] | None = None,
    ) -> None:
        import time
        from concurrent.futures import ThreadPoolExecutor

        self._executor: ThreadPoolExecutor = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="loopwatch-guard"
        )
        self._started = time.monotonic()
        self._hooks = hooks_module
        self.options = dict(options) if options is not None else None
        try:
            self.guard: LoopGuard = self._executor.submit(guard_factory).result()
        except BaseException:
            self._executor.shutdown(wait=False)
            raise

    def close(self) -> None:
        """Finish the running operation, then close the guard's store."""

        def close_store() -> None:
            closer = getattr(self.guard.store, "close", None)
            if callable(closer):
                closer()

        try:
            self._executor.submit(close_store).result()
        except Exception:
            logger.warning("loopwatch serve: closing the store failed", exc_info=True)
        self._executor.shutdown(wait=True)

    # --- entry points ---------------------------------------------------------------------

    def handle_bytes(self, data: bytes, op: str | None = None) -> dict[str, Any]:
        """Answer one raw request (a JSON object); ``op`` overrides the body's (HTTP path)."""
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return error_reply(E_BAD_JSON, MSG_BAD_UTF8)
        try:
            message = json.loads(text) if text.strip() or op is None else {}
        except ValueError as exc:
            return error_reply(E_BAD_JSON, MSG_BAD_JSON.format(error=exc))
        except RecursionError:
            return error_reply(E_BAD_JSON, MSG_TOO_DEEP)
        return self.handle(message, op)

    def handle(self, message: object, op: str | None = None) -> dict[str, Any]:
        """Answer one decoded request."""
        if not isinstance(message, dict):
            return error_reply(E_BAD_REQUEST, MSG_NOT_OBJECT)
        name = op if op is not None else message.get("op")
        reply: dict[str, Any]
        try:
            if not isinstance(name, str):
                raise ServeError(E_BAD_REQUEST, MSG_NO_OP)
            handler = self._ops().get(name)
            if handler is None:
                raise ServeError(E_UNKNOWN_OP, MSG_UNKNOWN_OP.format(op=name))
            reply = {"ok": True, "op": name, "result": handler(message)}
        except ServeError as exc:
            reply = error_reply(exc.code, exc.message)
        except Exception as exc:
            logger.exception("loopwatch serve: request failed")
            reply = error_reply(E_INTERNAL, MSG_INTERNAL.format(error=type(exc).__name__))
        if "id" in message:
            reply["id"] = message["id"]
        return reply

    # --- operations -----------------------------------------------------------------------

    def _ops(self) -> dict[str, Callable[[dict[str, Any]], dict[str, Any]]]:
        return {
            "health": self._health,
            "before_call": self._before_call,
            "after_call": self._after_call,
            "compaction_retry": self._compaction_retry,
            "history": self._history,
            "hook": self._hook,
        }

    def _run(self, work: Callable[[], Any]) -> Any:
        return self._executor.submit(work).result()

    def _health(self, _message: dict[str, Any]) -> dict[str, Any]:
        import time

        from loopwatch import __version__

        return {
            "status": "ok",
            "version": __version__,
            "pid": os.getpid(),
            "profile": self.guard.profile,
            "store": type(self.guard.store).__name__,
            "uptime_s": round(time.monotonic() - self._started, 3),
            "options": self.options,
            "ops": list(OPS),
        }

    def _before_call(self, message: dict[str, Any]) -> dict[str, Any]:
        session = _text_field(message, "session_key")
        tool = _text_field(message, "tool_name")
        run_id = _optional_field(message, "run_id")
        call_id = _optional_field(message, "tool_call_id")
        agent_id = _optional_field(message, "agent_id")
        params = message.get("params", {})
        decision: Decision = self._run(
            lambda: self.guard.before_call(
                tool,
                params,
                session_key=session,
                run_id=run_id,
                tool_call_id=call_id,
                agent_id=agent_id,
            )
        )
        return decision_json(decision)

    def _after_call(self, message: dict[str, Any]) -> dict[str, Any]:
        from loopwatch import UNDEFINED, PostCompactionLoopPersistedError

        session = _text_field(message, "session_key")
        tool = _text_field(message, "tool_name")
        run_id = _optional_field(message, "run_id")
        call_id = _optional_field(message, "tool_call_id")
        agent_id = _optional_field(message, "agent_id")
        params = message.get("params", {})
        # A key that is absent is "not given"; ``"error": null`` is a real (empty) error.
        result = message.get("result", UNDEFINED)
        error = message.get("error", UNDEFINED)

        def work() -> dict[str, Any]:
            try:
                record = self.guard.after_call(
                    tool,
                    params,
                    session_key=session,
                    run_id=run_id,
                    tool_call_id=call_id,
                    result=result,
                    error=error,
                    agent_id=agent_id,
                )
            except PostCompactionLoopPersistedError as exc:
                return {
                    "recorded": exc.record is not None,
                    "record": record_json(exc.record),
                    "end_run": True,
                    "message": exc.message,
                    "count": exc.count,
                    "detector": exc.detector,
                }
            return {"recorded": record is not None, "record": record_json(record), "end_run": False}

        answer: dict[str, Any] = self._run(work)
        return answer

    def _compaction_retry(self, message: dict[str, Any]) -> dict[str, Any]:
        session = _text_field(message, "session_key")
        run_id = _optional_field(message, "run_id")
        agent_id = _optional_field(message, "agent_id")
        self._run(
            lambda: self.guard.compaction_retry(
                session_key=session, run_id=run_id, agent_id=agent_id
            )
        )
        return {"armed": True}

    def _history(self, message: dict[str, Any]) -> dict[str, Any]:
        session = _text_field(message, "session_key")
        records = self._run(lambda: self.guard.history(session_key=session))
        return {"records": [record_json(record) for record in records]}

    def _hooks_module(self) -> Any:
        if self._hooks is None:
            import importlib

            try:
                self._hooks = importlib.import_module("loopwatch.hooks")
            except ImportError as exc:
                raise ServeError(E_UNAVAILABLE, MSG_NO_HOOKS) from exc
        return self._hooks

    def _check_options(self, given: object) -> None:
        keys = ("store", "config", "profile")
        if not isinstance(given, dict) or not set(given) <= set(keys):
            raise ServeError(E_BAD_REQUEST, MSG_OPTIONS)
        if any(value is not None and not isinstance(value, str) for value in given.values()):
            raise ServeError(E_BAD_REQUEST, MSG_OPTIONS)
        if self.options is None:
            return
        asked = {key: given.get(key) for key in keys}
        mine = {key: self.options.get(key) for key in keys}
        if asked != mine:
            raise ServeError(E_MISMATCH, MSG_MISMATCH.format(server=mine, hook=asked))

    def _hook(self, message: dict[str, Any]) -> dict[str, Any]:
        hooks = self._hooks_module()
        agents = tuple(getattr(hooks, "AGENTS", ()))
        agent = message.get("agent")
        if not isinstance(agent, str) or agent not in agents:
            raise ServeError(
                E_BAD_REQUEST, MSG_UNKNOWN_AGENT.format(agent=agent, agents=", ".join(agents))
            )
        if "options" in message:
            self._check_options(message["options"])
        payload = message.get("payload")
        if isinstance(payload, dict):
            payload = json.dumps(payload, ensure_ascii=False)
        if not isinstance(payload, str):
            raise ServeError(E_BAD_REQUEST, MSG_PAYLOAD)
        text: str = payload
        outcome = self._run(lambda: hooks.run_hook(agent, text, self.guard))
        return {
            "stdout": str(outcome.stdout),
            "exit_code": int(outcome.exit_code),
            "stderr": str(getattr(outcome, "stderr", "")),
        }


def error_reply(code: str, message: str) -> dict[str, Any]:
    """The API's error envelope."""
    return {"ok": False, "error": {"code": code, "message": message}}


def encode_reply(reply: Mapping[str, Any]) -> bytes:
    """One reply as a JSON line (non-JSON values, which guards never produce, become text).

    A reply that cannot be encoded (an echoed ``id`` nested too deeply) becomes an error.
    """
    try:
        # ASCII: a lone surrogate (valid in a JSON string) is escaped, never raised on.
        text = json.dumps(reply, separators=(",", ":"), default=str)
    except (RecursionError, ValueError, TypeError):
        text = json.dumps(error_reply(E_BAD_REQUEST, MSG_TOO_DEEP))
    return text.encode("ascii") + b"\n"


__all__ = ["Dispatcher", "decision_json", "encode_reply", "error_reply", "record_json"]
