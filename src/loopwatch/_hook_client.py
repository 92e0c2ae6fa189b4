"""The client side of the installed hook command (``python -S .../loopwatch/_hook_entry.py``).

An agent runs its hook once per tool call, so the interpreter's start-up is most of what a
hook costs, and most of that start-up is not Python's but ``site``'s: every ``.pth`` file of
site-packages runs (an editable install's finder, setuptools' distutils shim, whatever else
is installed), often more than the interpreter itself. So the installed command runs Python
with ``-S`` (no ``site``) and the entry script, which imports this module by its file's
folder (a module, unlike a script, keeps its bytecode cached) and calls :func:`main`:

- it puts the directory holding the ``loopwatch`` package on ``sys.path`` (in place of the
  script's own folder, which Python put there and which would shadow other modules), so a
  pip install, an editable install (the command names the script where it really is) and a
  venv all work without ``site``;
- it asks a running ``loopwatch serve`` first with a client of its own that imports nothing
  but the C modules ``_socket`` and ``_json``: ``import json`` alone costs as much as the
  interpreter's start (it imports ``re``), and ``import loopwatch`` pulls in ``logging``
  and ``typing``. Its request and its checks of the reply are those of
  :func:`loopwatch.serve.try_hook` (tests compare the two);
- otherwise it runs the hook in-process (:func:`loopwatch.cli._hook.main`, the same code
  as ``loopwatch hook``, with the stdin already read). What that needs from site-packages
  (``json5`` for a JSON5 config, ``redis`` for a Redis store) it loads ``site`` for, then.

Any other command (``hook status``, ``--help``, ``scan`` ...) loads ``site`` and runs the
ordinary command line. Only the standard library is imported here, at module level or not,
until the in-process fallback.

The entry script calls :func:`run`, which for an agent event also spares the process two
costs that are not the hook's work (together about a fifth of an in-process call's CPU):
the cyclic garbage collector, which the import of the guard's modules triggers over and
over although a process this short frees what it allocates by reference counting or by
exiting; and the interpreter's teardown (every module's dict cleared, ``atexit``), which
:func:`os._exit` skips once the answer is flushed. Nothing is lost by skipping it: the
store is closed by the hook itself and the log handler flushes every line it writes.
"""

from __future__ import annotations

import gc
import os
import sys

#: Mirrors of :mod:`loopwatch.serve`'s constants (``tests/hooks`` checks they agree).
SOCKET_ENV = "LOOPWATCH_SOCKET"
SOCKET_NAME = "serve.sock"
STORE_ENV = "LOOPWATCH_STORE"
CLIENT_TIMEOUT_S = 5.0
#: The flags of an agent event that take a value (as ``loopwatch.cli._hook`` reads them).
VALUE_FLAGS = ("--store", "--config", "--profile")
PROFILES = (None, "reference", "adaptive")
MAX_PAYLOAD_BYTES = 64 << 20
MAX_REPLY_BYTES = 64 << 20
OVERSIZED = "\x00loopwatch: the payload is over the read limit"


def read_payload(stream: object) -> str:
    """``loopwatch.hooks.read_payload``: at most ``MAX_PAYLOAD_BYTES`` of ``stream`` as
    text, else :data:`OVERSIZED`."""
    data: bytes = stream.read(MAX_PAYLOAD_BYTES + 1)  # type: ignore[attr-defined]
    if len(data) > MAX_PAYLOAD_BYTES:
        return OVERSIZED
    return data.decode("utf-8", errors="replace")


def _package_root() -> str:
    """The directory that holds the ``loopwatch`` package this file belongs to."""
    return os.path.dirname(os.path.dirname(os.path.realpath(__file__)))


def _fix_path() -> None:
    """The package's parent first on ``sys.path``, and the package folder itself nowhere."""
    here = os.path.dirname(os.path.realpath(__file__))
    sys.path[:] = [p for p in sys.path if not p or os.path.realpath(p) != here]
    root = _package_root()
    if root not in sys.path[:1]:
        sys.path.insert(0, root)


def quick_options(arguments: list[str]) -> tuple[str, dict[str, str | None]] | None:
    """``(agent, options)`` of a plain agent event, as ``loopwatch.cli._hook`` reads them.

    ``None`` for anything else (no agent, ``status``, an unknown flag, ``--help``): the
    ordinary command line decides those.
    """
    if not arguments or arguments[0].startswith("-") or arguments[0] == "status":
        return None
    values: dict[str, str | None] = dict.fromkeys(VALUE_FLAGS)
    rest = list(arguments[1:])
    while rest:
        flag = rest.pop(0)
        name, equals, value = flag.partition("=")
        if name not in values:
            return None
        if not equals:
            if not rest:
                return None
            value = rest.pop(0)
        values[name] = value
    if values["--profile"] not in PROFILES:
        return None
    store, config = values["--store"], values["--config"]
    return arguments[0], {
        "store": store or os.environ.get(STORE_ENV, "").strip() or None,
        "config": os.path.abspath(config) if config else None,
        "profile": values["--profile"] or None,
    }


def socket_path() -> str:
    """``$LOOPWATCH_SOCKET``, else ``serve.sock`` in the state folder (as the server's)."""
    given = os.environ.get(SOCKET_ENV)
    if given:
        return given
    base = os.environ.get("XDG_STATE_HOME", "")
    if not base or not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "loopwatch", SOCKET_NAME)


def _encode(value: object) -> str:
    """JSON of the request's values (strings, ``None`` and objects of them)."""
    if value is None:
        return "null"
    if isinstance(value, str):
        from _json import encode_basestring_ascii

        text: str = encode_basestring_ascii(value)
        return text
    if isinstance(value, dict):
        return "{" + ",".join(f"{_encode(k)}:{_encode(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot encode {type(value).__name__}")


class _Context:
    """What the C scanner of ``_json`` reads off a ``json.JSONDecoder`` (its defaults)."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = float  # NaN, Infinity: as json.loads reads them


def _decode(text: str) -> object:
    """``json.loads(text)`` with the C scanner (``ValueError`` on anything but one value)."""
    from _json import make_scanner

    try:
        value, end = make_scanner(_Context())(text, 0)  # type: ignore[arg-type]
    except StopIteration as exc:
        raise ValueError("not JSON") from exc
    if text[end:].strip(" \t\r\n"):
        raise ValueError("extra data")
    return value


def ask_server(
    agent: str, payload: str, options: dict[str, str | None], path: str | None = None
) -> tuple[str, int, str] | None:
    """The server's ``(stdout, exit_code, stderr)`` for this event, else ``None`` (never raises).

    The request and the checks of the reply are :func:`loopwatch.serve.try_hook`'s.
    """
    try:
        path = path or socket_path()
        if not os.path.exists(path):
            return None
        import _socket

        line = _encode({"agent": agent, "payload": payload, "options": options, "op": "hook"})
        conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        chunks: list[bytes] = []
        size = 0
        try:
            conn.settimeout(CLIENT_TIMEOUT_S)
            conn.connect(path)
            conn.sendall(line.encode("ascii") + b"\n")
            while size <= MAX_REPLY_BYTES:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
                if chunk.endswith(b"\n"):
                    break
        finally:
            conn.close()
        reply = _decode(b"".join(chunks).decode("utf-8"))
    except Exception:  # no server, a timeout, a bad reply: the hook runs in-process
        return None
    if not isinstance(reply, dict) or reply.get("ok") is not True:
        return None
    result = reply.get("result")
    if not isinstance(result, dict):
        return None
    stdout, exit_code, stderr = result.get("stdout"), result.get("exit_code"), result.get("stderr")
    if not isinstance(stdout, str) or type(exit_code) is not int or not isinstance(stderr, str):
        return None
    return stdout, exit_code, stderr


def _emit(stdout: str, stderr: str) -> None:
    try:
        if stdout:
            sys.stdout.write(stdout if stdout.endswith("\n") else stdout + "\n")
            sys.stdout.flush()
        if stderr:
            sys.stderr.write(stderr if stderr.endswith("\n") else stderr + "\n")
            sys.stderr.flush()
    except (OSError, ValueError):
        pass  # the agent closed the pipe: nothing left to tell it


def load_site() -> None:
    """Run ``site`` now when the interpreter started without it (``-S``)."""
    if "site" not in sys.modules:
        import site

        site.main()


def main(argv: list[str]) -> int:
    """``hook AGENT [flags]`` with the event on stdin; any other command goes to the CLI."""
    _fix_path()
    quick = quick_options(argv[1:]) if argv[:1] == ["hook"] else None
    if quick is None:
        load_site()
        from loopwatch.cli import main as cli_main

        return cli_main(argv)
    payload: str | None
    try:
        payload = read_payload(sys.stdin.buffer)
    except (OSError, ValueError):
        payload = None  # read again (and logged) by the in-process path
    if payload is not None:
        answer = ask_server(quick[0], payload, quick[1])
        if answer is not None:
            _emit(answer[0], answer[2])
            return answer[1]
    from loopwatch.cli._hook import main as hook_main

    return hook_main(argv[1:], payload=payload, try_server=False)


def run(argv: list[str]) -> None:
    """The entry script's whole process: :func:`main`, then exit with its code (it never
    returns; not annotated ``NoReturn``, as ``typing`` imports ``re``: 15 ms of a served hook).

    An agent event (``hook AGENT [flags]``) runs without the cyclic garbage collector and
    ends with :func:`os._exit` after stdout and stderr are flushed (see the module's
    docstring); any other command (``serve`` may run for days) exits normally.
    """
    if argv[:1] != ["hook"] or quick_options(argv[1:]) is None:
        raise SystemExit(main(argv))
    gc.disable()
    code = main(argv)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # the agent closed the pipe: nothing left to tell it
            continue
    os._exit(code)
