"""A CRM served over MCP with the official Python SDK (mcp 2.x, MCPServer), for pipec's
client tests.

What it offers
  tool get_deal(deal_id)     the deal as structured content and as JSON text, then two
                             resource links: the deal's activity, and its emails over the
                             whole of 2025 (that link carries the body's size)
  tool arm_expiry(count)     the next `count` email reads of this process fail as expired
  template mcp://crm/deals/{deal_id}/activity               the activity log, JSON
  template mcp://crm/deals/{deal_id}/emails/{start}/{end}   emails dated in [start, end]
                                                            (YYYY-MM-DD, both included), JSON

Environment
  CRM_EMAILS          emails per deal, about 1 KB each (default 5000, about 5 MB in all)
  CRM_ACTIVITIES      activity entries per deal (default 50)
  CRM_EXPIRE_EMAILS   the first N email reads of this process fail as expired links
  CRM_EXPIRE_FILE     a file holding a count: while it is above 0, each email read lowers
                      it by one and fails as an expired link (shared by every process that
                      names the same file, so a test can arm it between two processes)
  CRM_CALL_LOG        a file that gets one line per call and read:
                      `tool get_deal D1`, `read mcp://crm/deals/D1/activity`
  CRM_META_LOG        a file that gets the `_meta` (and the JSON-RPC request id) of every
                      tool call, one JSON line each:
                      {"tool": "get_deal", "meta": {...}, "request_id": "1"}
  CRM_TRANSPORT       `stdio` (the default) or `streamable-http`
  CRM_HTTP_PORT       the HTTP port on 127.0.0.1 (default 8765); 0 picks a free one and
                      says which: `listening on PORT` on stderr, and the bare number in
                      the file named by CRM_PORT_FILE when that is set
  CRM_HEADER_LOG      a file that gets one JSON line per HTTP request: its method, path
                      and headers

The data depends only on the deal id and CRM_EMAILS / CRM_ACTIVITIES, so two processes
give the same bytes. An expired link is reported as this SDK reports any missing
resource: JSON-RPC error -32602 with data {"uri": ...}.
"""

from __future__ import annotations

import datetime
import fcntl
import json
import os
import random
import socket
import sys
import zlib
from bisect import bisect_left, bisect_right
from functools import lru_cache

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError
from mcp.types import CallToolResult, ResourceLink, TextContent, ToolAnnotations

EMAIL_COUNT = int(os.environ.get("CRM_EMAILS", "5000"))
ACTIVITY_COUNT = int(os.environ.get("CRM_ACTIVITIES", "50"))
YEAR_START = datetime.date(2025, 1, 1)
YEAR_END = datetime.date(2025, 12, 31)
BODY_LENGTH = 840  # an email with its headers comes to about 1 KB of JSON

VOCABULARY = (
    "renewal pricing discount quarter forecast contract signature procurement review "
    "onboarding rollout seats licence budget approval champion demo pilot metrics "
    "integration timeline kickoff invoice terms volume tier upgrade expansion risk "
    "meeting agenda notes actions proposal draft redlines sponsor evaluation audit"
).split()
GIVEN_NAMES = "Ada Alan Barbara Dana Edsger Grace Joan Ken Linus Radia".split()
FAMILY_NAMES = "Lovelace Turing Liskov Scott Dijkstra Hopper Clarke Thompson Wirth Perlman".split()
COMPANIES = "Acme Globex Initech Umbrella Hooli Soylent Stark Wayne".split()
STAGES = ["prospecting", "qualification", "proposal", "negotiation", "closed-won"]

expiries_left = int(os.environ.get("CRM_EXPIRE_EMAILS", "0"))


def seeded(*parts: object) -> random.Random:
    """A generator that depends only on its parts, so every process draws the same data."""
    return random.Random(zlib.crc32("/".join(str(p) for p in parts).encode()))


def person(r: random.Random) -> str:
    return f"{r.choice(GIVEN_NAMES)} {r.choice(FAMILY_NAMES)}"


def address(name: str, company: str) -> str:
    first, last = name.lower().split()
    return f"{first}.{last}@{company.lower()}.example"


@lru_cache(maxsize=64)
def deal(deal_id: str) -> dict:
    r = seeded("deal", deal_id)
    company = r.choice(COMPANIES)
    return {
        "deal_id": deal_id,
        "name": f"{company} {r.choice(['platform', 'renewal', 'expansion'])} {r.randint(2025, 2027)}",
        "company": company,
        "stage": r.choice(STAGES),
        "amount": r.randint(10, 900) * 1000,
        "currency": "EUR",
        "owner": person(r),
        "close_date": (YEAR_END + datetime.timedelta(days=r.randint(1, 120))).isoformat(),
        "contacts": [person(r) for _ in range(3)],
    }


def day_of(index: int, count: int) -> str:
    """The date of the index-th of `count` items spread evenly over 2025."""
    days = (YEAR_END - YEAR_START).days + 1
    return (YEAR_START + datetime.timedelta(days=(index * days) // max(count, 1))).isoformat()


@lru_cache(maxsize=8)
def mailbox(deal_id: str) -> tuple[list[str], list[dict]]:
    """The deal's emails in date order, and their dates (for bisecting)."""
    d = deal(deal_id)
    r = seeded("mail", deal_id, EMAIL_COUNT)
    people = d["contacts"] + [d["owner"]]
    dates, emails = [], []
    for i in range(EMAIL_COUNT):
        sender = r.choice(people)
        recipient = d["owner"] if sender != d["owner"] else r.choice(d["contacts"])
        words = []
        while sum(len(w) + 1 for w in words) < BODY_LENGTH:
            words.append(r.choice(VOCABULARY))
        date = day_of(i, EMAIL_COUNT)
        dates.append(date)
        emails.append(
            {
                "id": f"{deal_id}-mail-{i:06d}",
                "date": date,
                "from": address(sender, d["company"]),
                "to": address(recipient, d["company"]),
                "subject": f"Re: {d['name']}: {r.choice(VOCABULARY)}",
                "body": " ".join(words)[:BODY_LENGTH],
            }
        )
    return dates, emails


@lru_cache(maxsize=64)
def activity_log(deal_id: str) -> list[dict]:
    d = deal(deal_id)
    r = seeded("activity", deal_id, ACTIVITY_COUNT)
    people = d["contacts"] + [d["owner"]]
    return [
        {
            "at": day_of(i, ACTIVITY_COUNT),
            "kind": r.choice(["call", "meeting", "note", "stage-change", "task"]),
            "by": r.choice(people),
            "summary": " ".join(r.choice(VOCABULARY) for _ in range(10)),
        }
        for i in range(ACTIVITY_COUNT)
    ]


def emails_json(deal_id: str, start: str, end: str) -> str:
    dates, emails = mailbox(deal_id)
    chosen = emails[bisect_left(dates, start) : bisect_right(dates, end)]
    return json.dumps({"deal_id": deal_id, "start": start, "end": end, "count": len(chosen), "emails": chosen})


@lru_cache(maxsize=8)
def whole_year_size(deal_id: str) -> int:
    return len(emails_json(deal_id, YEAR_START.isoformat(), YEAR_END.isoformat()).encode())


def activity_uri(deal_id: str) -> str:
    return f"mcp://crm/deals/{deal_id}/activity"


def emails_uri(deal_id: str, start: str, end: str) -> str:
    return f"mcp://crm/deals/{deal_id}/emails/{start}/{end}"


def is_date(text: str) -> bool:
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        return False
    return len(text) == 10


def append_line(variable: str, line: str) -> None:
    path = os.environ.get(variable)
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


def take_shared_expiry() -> bool:
    """Lowers the count in CRM_EXPIRE_FILE by one if it is above zero, under a lock so
    that two processes never take the same one; says whether this read expires."""
    path = os.environ.get("CRM_EXPIRE_FILE")
    if not path or not os.path.exists(path):
        return False
    with open(path, "r+", encoding="utf-8") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            left = int(f.read().strip() or "0")
        except ValueError:
            left = 0
        if left <= 0:
            return False
        f.seek(0)
        f.truncate()
        f.write(str(left - 1))
        return True


server = MCPServer("crm", log_level="WARNING")


@server.tool(
    title="Get a deal",
    annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False),
)
def get_deal(deal_id: str, ctx: Context) -> CallToolResult:
    """The deal, with links to its activity and to its emails."""
    append_line("CRM_CALL_LOG", f"tool get_deal {deal_id}")
    meta = ctx.request_context.meta or {}
    append_line("CRM_META_LOG", json.dumps({"tool": "get_deal", "meta": dict(meta), "request_id": str(ctx.request_id)}, default=str))
    d = deal(deal_id)
    start, end = YEAR_START.isoformat(), YEAR_END.isoformat()
    return CallToolResult(
        content=[
            TextContent(type="text", text=json.dumps(d)),
            ResourceLink(
                type="resource_link",
                uri=activity_uri(deal_id),
                name=f"{deal_id}-activity",
                description="activity-history",
                mime_type="application/json",
            ),
            ResourceLink(
                type="resource_link",
                uri=emails_uri(deal_id, start, end),
                name=f"{deal_id}-emails-{start}-{end}",
                description="email-history",
                mime_type="application/json",
                size=whole_year_size(deal_id),
            ),
        ],
        structured_content=d,
    )


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False))
def arm_expiry(count: int = 1) -> str:
    """The next `count` email reads fail as if their link had expired."""
    global expiries_left
    expiries_left = max(0, int(count))
    return json.dumps({"armed": expiries_left})


@server.resource("mcp://crm/deals/{deal_id}/activity", mime_type="application/json")
def activity(deal_id: str) -> str:
    """The activity log of a deal."""
    append_line("CRM_CALL_LOG", f"read {activity_uri(deal_id)}")
    return json.dumps({"deal_id": deal_id, "activity": activity_log(deal_id)})


@server.resource("mcp://crm/deals/{deal_id}/emails/{start}/{end}", mime_type="application/json")
def emails(deal_id: str, start: str, end: str) -> str:
    """The emails of a deal dated from start to end (YYYY-MM-DD, both included)."""
    global expiries_left
    uri = emails_uri(deal_id, start, end)
    append_line("CRM_CALL_LOG", f"read {uri}")
    if expiries_left > 0:
        expiries_left -= 1
        raise ResourceNotFoundError(f"resource link expired: {uri}")
    if take_shared_expiry():
        raise ResourceNotFoundError(f"resource link expired: {uri}")
    if not (is_date(start) and is_date(end)):
        raise ResourceNotFoundError(f"not a date range: {start}/{end}")
    return emails_json(deal_id, start, end)


def announce_port(port: int) -> None:
    print(f"listening on {port}", file=sys.stderr, flush=True)
    path = os.environ.get("CRM_PORT_FILE")
    if path:
        # Written beside and renamed, so a reader never sees half a number.
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            f.write(str(port))
        os.replace(path + ".tmp", path)


def serve_http() -> None:
    import uvicorn

    host = "127.0.0.1"
    app = server.streamable_http_app(streamable_http_path="/mcp", host=host)

    async def logging_app(scope, receive, send):
        if scope["type"] == "http":
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
            append_line(
                "CRM_HEADER_LOG",
                json.dumps({"method": scope["method"], "path": scope["path"], "headers": headers}),
            )
        await app(scope, receive, send)

    # The socket is bound here, not by uvicorn, so that port 0 can be read back.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, int(os.environ.get("CRM_HTTP_PORT", "8765"))))
    sock.listen(128)
    sock.set_inheritable(True)
    announce_port(sock.getsockname()[1])
    config = uvicorn.Config(logging_app, log_level="warning")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    if os.environ.get("CRM_TRANSPORT", "stdio") == "streamable-http":
        serve_http()
    else:
        server.run()
