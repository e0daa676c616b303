"""An MCP stdio server whose tools have the schemas `pipec tools pull` must turn into
types, for pipec's tests. Python's standard library only: it speaks JSON-RPC lines by
hand, and lists tools without ever running them.

    schema_server.py [PROTOCOL_VERSION]

It answers `server/discover` with "method not found", so the client falls back to
`initialize`, which it answers with PROTOCOL_VERSION (default 2025-03-26, older than
resource links). It has no resources: `resources/templates/list` is "method not found".

Tools (tools/list)
  search-tickets   no annotations; a closed input schema with a name that is not an
                   identifier (`page-size`), an enum, a nullable field, a default;
                   a result with $defs, nested records, a list of records, a field
                   named `x-total` and a map
  getOwner         read-only; an input record; no output schema. With SCHEMA_ECHO set
                   in its environment, its description ends with that value, as is
                   and in a JSON example escaped the way Go escapes `&`, `<` and `>`
                   (a server that echoes what it was started with)
  update-ticket    takes a ticket and answers one: the records of search-tickets again,
                   defined in schemas of its own, as an argument and as a result
  classify         read-only; a result field that is an object or a string (so `json`)
  get-team         read-only; a result whose $defs define `Person` otherwise than
                   search-tickets does
"""

from __future__ import annotations

import json
import os
import sys

TICKET = {
    "type": "object",
    "description": "One ticket.",
    "properties": {
        "id": {"type": "string"},
        "title": {"type": "string", "description": "What the ticket is about."},
        "priority": {"enum": ["low", "normal", "high"]},
        "assignee": {"anyOf": [{"$ref": "#/$defs/Person"}, {"type": "null"}]},
        "labels": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["id", "title", "priority", "labels"],
}

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "manager": {"$ref": "#/$defs/Person"}},
    "required": ["name"],
}

TOOLS = [
    {
        "name": "search-tickets",
        "description": "Search tickets by text.\n\nEvery hit is a ticket.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Words to look for."},
                "page-size": {"type": "integer", "default": 20},
                "status": {"enum": ["open", "closed"], "default": "open"},
                "since": {"type": ["string", "null"]},
            },
            "required": ["query"],
            "additionalProperties": False,
        },
        "outputSchema": {
            "type": "object",
            "properties": {
                "hits": {"type": "array", "items": {"$ref": "#/$defs/Ticket"}},
                "x-total": {"type": "integer"},
                "facets": {"type": "object", "additionalProperties": {"type": "integer"}},
                "next": {"type": "object", "properties": {"cursor": {"type": "string"}}},
            },
            "required": ["hits"],
            "$defs": {
                "Ticket": TICKET,
                "Person": PERSON,
            },
        },
    },
    {
        "name": "getOwner",
        "title": "Owner of an account",
        "inputSchema": {
            "type": "object",
            "properties": {
                "account": {
                    "type": "object",
                    "properties": {"id": {"type": "string"}, "region": {"type": "string"}},
                    "required": ["id"],
                }
            },
            "required": ["account"],
        },
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "update-ticket",
        "description": "Change a ticket; answers it as it is now.",
        "inputSchema": {
            "type": "object",
            "properties": {"ticket": {"$ref": "#/$defs/Ticket"}},
            "required": ["ticket"],
            "$defs": {"Ticket": TICKET, "Person": PERSON},
        },
        "outputSchema": {
            "type": "object",
            "properties": {"ticket": {"$ref": "#/$defs/Ticket"}},
            "required": ["ticket"],
            "$defs": {"Ticket": TICKET, "Person": PERSON},
        },
        "annotations": {"idempotentHint": True, "destructiveHint": False},
    },
    {
        "name": "classify",
        "description": "Guess a label for a text.",
        "inputSchema": {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
        "outputSchema": {
            "type": "object",
            "properties": {
                "label": {
                    "anyOf": [
                        {"type": "object", "properties": {"code": {"type": "string"}, "score": {"type": "number"}}},
                        {"type": "string"},
                    ]
                }
            },
        },
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "get-team",
        "description": "A team and who leads it.",
        "inputSchema": {
            "type": "object",
            "properties": {"team": {"type": "string"}},
            "required": ["team"],
        },
        "outputSchema": {
            "type": "object",
            "properties": {"lead": {"$ref": "#/$defs/Person"}},
            "required": ["lead"],
            "$defs": {
                "Person": {
                    "type": "object",
                    "properties": {"email": {"type": "string"}},
                    "required": ["email"],
                }
            },
        },
        "annotations": {"readOnlyHint": True},
    },
]


def echoed(tools: list) -> list:
    """The tools, with SCHEMA_ECHO at the end of getOwner's description."""
    echo = os.environ.get("SCHEMA_ECHO")
    if not echo:
        return tools
    go = json.dumps({"token": echo}).replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
    return [
        {**tool, "description": f"Owner. Started with {echo}; config {go}"} if tool["name"] == "getOwner" else tool
        for tool in tools
    ]


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def handle(message: dict, version: str) -> None:
    method = message.get("method")
    request_id = message.get("id")
    if method is None or request_id is None:
        return  # a notification, or an answer
    if method == "initialize":
        result = {
            "protocolVersion": version,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "schemas", "version": "1"},
        }
    elif method == "ping":
        result = {}
    elif method == "tools/list":
        result = {"tools": echoed(TOOLS)}
    else:
        send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": f"Method not found: {method}"}})
        return
    send({"jsonrpc": "2.0", "id": request_id, "result": result})


def main() -> None:
    version = sys.argv[1] if len(sys.argv) > 1 else "2025-03-26"
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict):
            handle(message, version)


if __name__ == "__main__":
    main()
