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
                refused with -32601, as MCP 2025-11-25 says; a call with one is
                answered with the task, `working` at the first `tasks/get` and
                `completed` at the next, and `tasks/result` gives
                {"report": arguments.quarter}

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


TASKS: dict = {}


def task_state(task_id: str, status: str) -> dict:
    return {
        "taskId": task_id,
        "status": status,
        "ttl": 60000,
        "pollInterval": 100,
        "createdAt": "2026-12-05T00:00:00Z",
        "lastUpdatedAt": "2026-12-05T00:00:00Z",
    }


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
    known = ("initialize", "tools/list", "tools/call", "tasks/get", "tasks/result")
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
        if name == "long_report":
            task_id = f"task-{len(TASKS) + 1}"
            TASKS[task_id] = {"polls": 0, "quarter": arguments.get("quarter")}
            result = {"task": task_state(task_id, "working")}
            send({"jsonrpc": "2.0", "id": request_id, "result": result})
            return
        result = {
            "content": [{"type": "text", "text": json.dumps({"found": arguments.get("key")})}],
            "structuredContent": {"found": arguments.get("key")},
        }
    elif method in ("tasks/get", "tasks/result") and (message.get("params") or {}).get("taskId") in TASKS:
        task_id = message["params"]["taskId"]
        task = TASKS[task_id]
        if method == "tasks/get":
            task["polls"] += 1
            result = task_state(task_id, "working" if task["polls"] < 2 else "completed")
        else:
            report = {"report": task["quarter"]}
            result = {"content": [{"type": "text", "text": json.dumps(report)}], "structuredContent": report}
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
