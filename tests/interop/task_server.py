"""An MCP stdio server of revision 2026-07-28 that runs tool calls as tasks (the
`io.modelcontextprotocol/tasks` extension), for pipec's tests. Python's standard
library only: it speaks JSON-RPC lines by hand. Its tasks live in files, so a task
outlives the process that created it, as a hosted server's do: a client that crashed
and started this server again polls the same task.

    task_server.py --state DIR [--log FILE]

Tools (tools/list)
  slow_compute(seconds, label)   a call from a client that declares the extension (in
                                 the request's `_meta`) is answered at once with a task,
                                 `working` until `seconds` have passed since, then
                                 `completed` with {"label": ..., "seconds": ...}; without
                                 the extension it waits and answers directly
  approved_compute(seconds, label)  the same, as a task that first asks a form
                                 ("Compute LABEL?", confirm: bool): `input_required` until
                                 `tasks/update` answers it, then `seconds` of work, and
                                 the result has the answer as "approved"

Requests: server/discover, tools/list, tools/call, tasks/get (an unknown task is
-32602), tasks/update, tasks/cancel. --log appends one JSON line per tools/call and tasks/get.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid

EXTENSION = "io.modelcontextprotocol/tasks"

parser = argparse.ArgumentParser()
parser.add_argument("--state", required=True)
parser.add_argument("--log")
options = parser.parse_args()
os.makedirs(options.state, exist_ok=True)

TOOL = {
    "name": "slow_compute",
    "description": "Computes slowly, as a task.",
    "inputSchema": {
        "type": "object",
        "properties": {"seconds": {"type": "number"}, "label": {"type": "string"}},
        "required": ["seconds", "label"],
    },
    "annotations": {"readOnlyHint": False, "idempotentHint": False},
}
APPROVED = {**TOOL, "name": "approved_compute", "description": "Computes once approved."}

FORM = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean"}},
    "required": ["confirm"],
}


def log(entry: dict) -> None:
    if options.log:
        with open(options.log, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def task_path(task_id: str) -> str:
    return os.path.join(options.state, f"{task_id}.json")


def load(task_id: str) -> dict | None:
    if not isinstance(task_id, str) or not task_id.isalnum():
        return None
    try:
        with open(task_path(task_id), encoding="utf-8") as f:
            return json.load(f)
    except OSError:
        return None


def save(task: dict) -> None:
    with open(task_path(task["id"]), "w", encoding="utf-8") as f:
        json.dump(task, f)


def base(task: dict, status: str) -> dict:
    return {
        "taskId": task["id"],
        "status": status,
        "createdAt": task["createdAt"],
        "lastUpdatedAt": now_iso(),
        "ttlMs": 600000,
        "pollIntervalMs": 200,
    }


def result_of(task: dict) -> dict:
    value = {"label": task["label"], "seconds": task["seconds"]}
    if task.get("asks"):
        value["approved"] = task["approved"]
    return {
        "content": [{"type": "text", "text": json.dumps(value)}],
        "structuredContent": value,
    }


def handle(message: dict) -> None:
    method = message.get("method")
    request_id = message.get("id")
    if method is None or request_id is None:
        return
    params = message.get("params") or {}
    meta = params.get("_meta") or {}
    if method == "server/discover":
        result = {
            "resultType": "complete",
            "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {}, "extensions": {EXTENSION: {}}},
            "ttlMs": 0,
            "cacheScope": "private",
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "tasks", "version": "1"}},
        }
    elif method == "tools/list":
        result = {"resultType": "complete", "tools": [TOOL, APPROVED]}
    elif method == "tools/call" and params.get("name") in ("slow_compute", "approved_compute"):
        arguments = params.get("arguments") or {}
        capabilities = meta.get("io.modelcontextprotocol/clientCapabilities") or {}
        declared = EXTENSION in (capabilities.get("extensions") or {})
        log({"method": "tools/call", "tool": params.get("name"), "label": arguments.get("label"), "task": declared})
        task = {
            "id": uuid.uuid4().hex,
            "label": arguments.get("label"),
            "seconds": arguments.get("seconds", 0),
            "due": time.time() + float(arguments.get("seconds", 0)),
            "createdAt": now_iso(),
            "cancelled": False,
            "asks": params.get("name") == "approved_compute",
            "approved": None,
        }
        if declared:
            save(task)
            result = {"resultType": "task", **base(task, "working")}
        else:
            time.sleep(float(task["seconds"]))
            result = {"resultType": "complete", **result_of(task)}
    elif method in ("tasks/get", "tasks/cancel", "tasks/update"):
        task = load(params.get("taskId"))
        log({"method": method, "taskId": params.get("taskId"), "responses": params.get("inputResponses")})
        if task is None:
            send({
                "jsonrpc": "2.0",
                "id": request_id,
                "error": {"code": -32602, "message": "unknown task"},
            })
            return
        if method == "tasks/cancel":
            task["cancelled"] = True
            save(task)
        if method == "tasks/update":
            answer = (params.get("inputResponses") or {}).get("confirm") or {}
            if task["asks"] and task["approved"] is None and answer:
                task["approved"] = answer.get("action") == "accept" and bool(
                    (answer.get("content") or {}).get("confirm")
                )
                task["due"] = time.time() + float(task["seconds"])
                save(task)
            send({"jsonrpc": "2.0", "id": request_id, "result": {"resultType": "complete"}})
            return
        if task["cancelled"]:
            result = base(task, "cancelled")
        elif task["asks"] and task["approved"] is None:
            result = {
                **base(task, "input_required"),
                "inputRequests": {
                    "confirm": {
                        "method": "elicitation/create",
                        "params": {"mode": "form", "message": f"Compute {task['label']}?", "requestedSchema": FORM},
                    }
                },
            }
        elif time.time() >= task["due"]:
            result = {**base(task, "completed"), "result": result_of(task)}
        else:
            result = base(task, "working")
        result["resultType"] = "complete"
    else:
        send({
            "jsonrpc": "2.0",
            "id": request_id,
            "error": {"code": -32601, "message": f"Method not found: {method}"},
        })
        return
    send({"jsonrpc": "2.0", "id": request_id, "result": result})


def main() -> None:
    for line in sys.stdin:
        line = line.strip()
        if line:
            handle(json.loads(line))


if __name__ == "__main__":
    main()
