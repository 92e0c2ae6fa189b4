"""A bare JSON-RPC line server for the hostile proxy tests (no MCP SDK: every byte is ours).

``python raw_server.py MODE [ARG]``. Every ``tools/call`` is answered with one text part:
the call's ``arguments["reply"]`` (default ``"ok"``), so a test chooses the bytes the proxy
must rewrite. Modes change what happens around that:

- ``echo``: only that.
- ``huge N``: the first ``tools/call`` is answered with a line of ``N`` bytes.
- ``exit N``: exit with status ``N`` at once (after printing nothing).
- ``deaf``: ignore stdin EOF and SIGTERM (sleep on forever).
- ``child``: start a grandchild that sleeps, print its pid, then serve; exit on EOF.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time


def answer(message: object, text: str) -> bytes:
    result = {"content": [{"type": "text", "text": text}], "isError": False}
    rid = message.get("id") if isinstance(message, dict) else None
    reply = {"jsonrpc": "2.0", "id": rid, "result": result}
    # ensure_ascii keeps lone surrogates as \\ud800 escapes, as a Node server writes them
    return json.dumps(reply).encode() + b"\n"


def serve(huge: int = 0) -> None:
    out = sys.stdout.buffer
    for raw in sys.stdin.buffer:
        try:
            message = json.loads(raw)
        except ValueError:
            continue
        if isinstance(message, list):  # a batch: one array of answers
            replies = [answer(m, reply_text(m)) for m in message if is_call(m)]
            out.write(b"[" + b",".join(r[:-1] for r in replies) + b"]\n")
        elif is_call(message):
            text = reply_text(message)
            if huge:
                text, huge = "x" * huge, 0
            out.write(answer(message, text))
        out.flush()


def is_call(message: object) -> bool:
    return isinstance(message, dict) and message.get("method") == "tools/call"


def reply_text(message: dict[str, object]) -> str:
    params = message.get("params") or {}
    arguments = params.get("arguments") if isinstance(params, dict) else None
    return str(arguments.get("reply", "ok")) if isinstance(arguments, dict) else "ok"


def main() -> None:
    mode = sys.argv[1]
    if mode == "exit":
        sys.exit(int(sys.argv[2]))
    if mode == "deaf":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("ready", flush=True)
        while True:
            time.sleep(60)
    if mode == "child":
        sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        print(sleeper.pid, flush=True)
        serve()
        os._exit(0)  # the grandchild is left running: the proxy must end it
    serve(int(sys.argv[2]) if mode == "huge" else 0)


if __name__ == "__main__":
    main()
