"""A small MCP server over stdio for the proxy tests (run as a script by the proxy).

``read_file`` always returns the same text (a loop waiting to happen) and counts how often
it really ran; ``stats`` reports that count, so a test can prove that blocked calls never
reached the server. ``echo`` and ``tick`` give answers that change, for traffic that must
pass through unchanged; ``fail`` raises, which the server reports as an ``isError`` result.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("loopwatch-test-echo")
runs = {"read_file": 0, "tick": 0}


@server.tool()
def read_file(path: str) -> str:
    """Read a file (always the same text)."""
    runs["read_file"] += 1
    return "the same text"


@server.tool()
def echo(text: str) -> str:
    """Say the text back."""
    return text


@server.tool()
def tick() -> str:
    """A counter: a different answer every time."""
    runs["tick"] += 1
    return f"tick {runs['tick']}"


@server.tool()
def stats() -> str:
    """How often read_file really ran."""
    return str(runs["read_file"])


@server.tool()
def fail(reason: str) -> str:
    """Always fails."""
    raise ValueError(reason)


if __name__ == "__main__":
    server.run()
