"""An MCP stdio server that is lax the way some servers in the wild are, for pipec's
tests. Python's standard library only: it speaks JSON-RPC lines by hand.

    lax_server.py [--refuse-discover | --strict]

It answers every request it does not know with an empty result (`{}`), `server/discover`
among them, so a client has to fall back to `initialize`, which it answers for
2025-11-25 with the `tools` capability only: it offers no resources, and answers
`resources/templates/list` and `resources/list` with `{}` too. With --refuse-discover it
answers `server/discover` with "method not found", as a server of 2025-11-25 does, and
is lax about everything else; with --strict it answers every method it does not know
that way.

Tools (tools/list)
  lookup        read-only; returns {"found": arguments.key}
  long_report   `execution.taskSupport` is "required": a call without a task is
                refused with -32601, as MCP 2025-11-25 says

Environment
  LAX_LOG       a file that gets the method of every message received, one a line
"""

from __future__ import annotations

import json
import os
import sys

TOOLS = [
    {
        "name": "lookup",
        "description": "Look a key up.",
        "inputSchema": {
            "type": "object",
            "properties": {"key": {"type": "string"}},
            "required": ["key"],
        },
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "long_report",
        "description": "A report that takes hours: it runs only as a task.",
        "inputSchema": {
            "type": "object",
            "properties": {"quarter": {"type": "string"}},
            "required": ["quarter"],
        },
        "execution": {"taskSupport": "required"},
        "annotations": {"readOnlyHint": True},
    },
]


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def log(method: str) -> None:
    path = os.environ.get("LAX_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(method + "\n")


def handle(message: dict, refuse_discover: bool, strict: bool) -> None:
    method = message.get("method")
    request_id = message.get("id")
    if method is not None:
        log(method)
    if method is None or request_id is None:
        return  # a notification, or an answer
    known = ("initialize", "tools/list", "tools/call")
    if strict and method not in known or refuse_discover and method == "server/discover":
        send({
            "jsonrpc": "2.0",
            "id": request_id,
            "error": {"code": -32601, "message": f"Method not found: {method}"},
        })
        return
    if method == "initialize":
        result = {
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "lax", "version": "1"},
        }
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        params = message.get("params") or {}
        name = params.get("name")
        arguments = params.get("arguments") or {}
        if name == "long_report" and "task" not in params:
            send({
                "jsonrpc": "2.0",
                "id": request_id,
                "error": {"code": -32601, "message": "long_report must be called as a task"},
            })
            return
        result = {
            "content": [{"type": "text", "text": json.dumps({"found": arguments.get("key")})}],
            "structuredContent": {"found": arguments.get("key")},
        }
    else:
        # What a lax server answers to anything it does not know.
        result = {}
    send({"jsonrpc": "2.0", "id": request_id, "result": result})


def main() -> None:
    refuse_discover = "--refuse-discover" in sys.argv[1:]
    strict = "--strict" in sys.argv[1:]
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict):
            handle(message, refuse_discover, strict)


if __name__ == "__main__":
    main()
