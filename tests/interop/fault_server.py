"""An MCP stdio server that misbehaves on request, for pipec's client tests. Python's
standard library only: it speaks JSON-RPC lines by hand.

    fault_server.py [MODE]

MODE
  normal            (the default) answers `server/discover` with "method not found", so
                    the client falls back to `initialize`, which it answers for
                    2025-11-25; then each tool does what its name says (below)
  no-handshake      reads its input and never answers anything
  garbage-first     writes a line that is not JSON before anything else

Tools (tools/call)
  echo              structured content: {"arguments": ..., "meta": <the request's _meta>}
  env               structured content: {NAME: value or null} for each of arguments.names
  big               a text block of arguments.bytes bytes; with arguments.id_last the
                    answer's "id" comes after the result
  malformed         a text block, a resource_link without a uri, then a good link
  exit              writes arguments.stderr to stderr and exits (status 3), unanswered
  hang              never answers
  garbage           writes arguments.lines lines that are not JSON instead of answering
  slow              answers after arguments.seconds
  ask               answers with resultType "input_required": arguments.kind "sampling"
                    (the default) asks for a model's reply, "elicit" asks a form whose
                    one required field has a default (with the requestState
                    "opaque-1"), "empty" asks nothing; the call sent again with input
                    responses or a requestState is answered with a text block of them
                    ({"responses": ..., "state": ...} as JSON)

Resources (resources/read)
  fault://blob            a blob: the bytes 0..255
  fault://text            a text content
  fault://error/CODE      a JSON-RPC error with that code

Listing (tools/list)
  one tool, `echo`; with FAULT_PAGES=N, N pages of one tool each (echo, tool2, ...);
  with FAULT_CURSOR_LOOP=1 every page names the same next cursor; with
  FAULT_LONG_LIST=N the tool's description is N bytes long

Environment
  FAULT_LOG         a file that gets the method of every message received, one a line
  FAULT_PID_FILE    a file that gets this process's id at start
  FAULT_STDERR      text written to stderr at start
"""

from __future__ import annotations

import base64
import json
import os
import sys
import threading
import time

out_lock = threading.Lock()


def write_raw(data: bytes) -> None:
    with out_lock:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()


def send(message: dict) -> None:
    write_raw((json.dumps(message) + "\n").encode())


def answer(request_id, result: dict) -> None:
    send({"jsonrpc": "2.0", "id": request_id, "result": result})


def error(request_id, code: int, message: str, data=None) -> None:
    body = {"code": code, "message": message}
    if data is not None:
        body["data"] = data
    send({"jsonrpc": "2.0", "id": request_id, "error": body})


def log(method: str) -> None:
    path = os.environ.get("FAULT_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(method + "\n")


def text_result(text: str) -> dict:
    return {"content": [{"type": "text", "text": text}], "isError": False}


def call_tool(request_id, params: dict) -> None:
    name = params.get("name")
    args = params.get("arguments") or {}
    if name == "echo":
        answer(request_id, {"content": [], "structuredContent": {"arguments": args, "meta": params.get("_meta")}})
    elif name == "env":
        values = {n: os.environ.get(n) for n in args.get("names", [])}
        answer(request_id, {"content": [], "structuredContent": values})
    elif name == "big":
        size = int(args.get("bytes", 1000))
        head = '{"jsonrpc":"2.0",' + ("" if args.get("id_last") else f'"id":{json.dumps(request_id)},')
        head += '"result":{"content":[{"type":"text","text":"'
        tail = '"}]}' + (f',"id":{json.dumps(request_id)}' if args.get("id_last") else "") + "}\n"
        with out_lock:
            sys.stdout.buffer.write(head.encode())
            chunk = b"x" * (1 << 20)
            left = size
            while left > 0:
                piece = chunk[: min(left, len(chunk))]
                sys.stdout.buffer.write(piece)
                left -= len(piece)
            sys.stdout.buffer.write(tail.encode())
            sys.stdout.buffer.flush()
    elif name == "malformed":
        answer(
            request_id,
            {
                "content": [
                    {"type": "text", "text": "before"},
                    {"type": "resource_link", "name": "no-uri"},
                    {"type": "resource_link", "uri": "fault://text", "name": "good", "size": 4},
                ],
                "structuredContent": {"ok": True},
            },
        )
    elif name == "exit":
        sys.stderr.write(args.get("stderr", ""))
        sys.stderr.flush()
        os._exit(3)
    elif name == "hang":
        return
    elif name == "garbage":
        for i in range(int(args.get("lines", 1))):
            write_raw(f"not a message, line {i}\n".encode())
    elif name == "slow":
        time.sleep(float(args.get("seconds", 1)))
        answer(request_id, text_result("slept"))
    elif name == "ask":
        if "inputResponses" in params or "requestState" in params:
            echoed = {"responses": params.get("inputResponses"), "state": params.get("requestState")}
            answer(request_id, text_result(json.dumps(echoed, sort_keys=True)))
            return
        kind = args.get("kind", "sampling")
        if kind == "empty":
            answer(request_id, {"resultType": "input_required", "inputRequests": {}})
        elif kind == "elicit":
            form = {
                "message": "Who is asking?",
                "requestedSchema": {
                    "type": "object",
                    "properties": {"name": {"type": "string", "default": "Ada"}},
                    "required": ["name"],
                },
            }
            answer(request_id, {
                "resultType": "input_required",
                "inputRequests": {"who": {"method": "elicitation/create", "params": form}},
                "requestState": "opaque-1",
            })
        else:
            sampling = {
                "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
                "maxTokens": 10,
            }
            answer(request_id, {
                "resultType": "input_required",
                "inputRequests": {"reply": {"method": "sampling/createMessage", "params": sampling}},
            })
    else:
        answer(request_id, {"content": [{"type": "text", "text": f"no tool {name}"}], "isError": True})


def list_tools(request_id, params: dict) -> None:
    pages = int(os.environ.get("FAULT_PAGES", "1"))
    page = int(params.get("cursor") or "1")
    name = "echo" if page == 1 else f"tool{page}"
    result = {"tools": [{"name": name, "inputSchema": {"type": "object"}}]}
    if os.environ.get("FAULT_LONG_LIST"):
        result["tools"][0]["description"] = "d" * int(os.environ["FAULT_LONG_LIST"])
    if os.environ.get("FAULT_CURSOR_LOOP"):
        result["nextCursor"] = "2"
    elif page < pages:
        result["nextCursor"] = str(page + 1)
    answer(request_id, result)


def read_resource(request_id, params: dict) -> None:
    uri = params.get("uri", "")
    if uri == "fault://blob":
        blob = base64.b64encode(bytes(range(256))).decode()
        answer(request_id, {"contents": [{"uri": uri, "mimeType": "application/octet-stream", "blob": blob}]})
    elif uri == "fault://text":
        answer(request_id, {"contents": [{"uri": uri, "mimeType": "text/plain", "text": "four"}]})
    elif uri.startswith("fault://error/"):
        code = int(uri.rsplit("/", 1)[1])
        error(request_id, code, f"cannot read {uri}", {"uri": uri})
    else:
        error(request_id, -32602, f"Unknown resource: {uri}", {"uri": uri})


def handle(message: dict, mode: str) -> None:
    method = message.get("method")
    request_id = message.get("id")
    if method is None or mode == "no-handshake":
        return
    if request_id is None:
        return  # a notification
    if method == "server/discover":
        error(request_id, -32601, "Method not found: server/discover")
    elif method == "initialize":
        answer(
            request_id,
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}, "resources": {}},
                "serverInfo": {"name": "fault", "version": "1"},
            },
        )
    elif method == "ping":
        answer(request_id, {})
    elif method == "tools/list":
        list_tools(request_id, message.get("params") or {})
    elif method == "tools/call":
        threading.Thread(target=call_tool, args=(request_id, message.get("params") or {}), daemon=True).start()
    elif method == "resources/read":
        read_resource(request_id, message.get("params") or {})
    else:
        error(request_id, -32601, f"Method not found: {method}")


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "normal"
    pid_file = os.environ.get("FAULT_PID_FILE")
    if pid_file:
        with open(pid_file, "w", encoding="utf-8") as f:
            f.write(str(os.getpid()))
    if os.environ.get("FAULT_STDERR"):
        sys.stderr.write(os.environ["FAULT_STDERR"])
        sys.stderr.flush()
    if mode == "garbage-first":
        write_raw(b"Server starting, please wait\n")
    for line in sys.stdin.buffer:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict):
            log(str(message.get("method")))
            handle(message, mode)


if __name__ == "__main__":
    main()
