"""An inventory served with FastMCP (PyPI `fastmcp`, the framework many MCP servers are
written with), for pipec's interop tests. Over stdio.

What it offers
  tool stock(item)                    {"item", "count"} as structured content
  resource inventory://items/{item}   one item's record, JSON (a template)
  prompt restock(item)                a message asking to restock an item
"""

from __future__ import annotations

import json

from fastmcp import FastMCP

server = FastMCP("inventory")

STOCK = {"widget": 12, "gadget": 0}


@server.tool(annotations={"readOnlyHint": True})
def stock(item: str) -> dict:
    """How many of an item are in stock."""
    return {"item": item, "count": STOCK.get(item, 0)}


@server.resource("inventory://items/{item}", mime_type="application/json")
def item_record(item: str) -> str:
    """One item's record."""
    return json.dumps({"item": item, "count": STOCK.get(item, 0), "warehouse": "north"})


@server.prompt
def restock(item: str) -> str:
    """Ask for a restock of an item."""
    return f"Order more of {item}: {STOCK.get(item, 0)} left."


if __name__ == "__main__":
    server.run(show_banner=False)
