"""Quarterly reports served over MCP with the official Python SDK (mcp 2.x, MCPServer),
for pipec's tests: every report is a fixed resource (`resources/list`), and no template
(`resources/templates/list` is empty), as a server lists a small, known set of
documents.

What it offers
  resource mcp://reports/2025/q1 ... mcp://reports/2025/q4   one quarter's figures, JSON
  tool summarize(quarter)                                    a sentence about a quarter
  prompt quarter_brief(quarter, tone?)                       a message asking for a brief
"""

from __future__ import annotations

import json

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("reports", log_level="WARNING")

FIGURES = {"q1": 120, "q2": 135, "q3": 128, "q4": 150}


def register(quarter: str, revenue: int) -> None:
    @server.resource(
        f"mcp://reports/2025/{quarter}",
        name=f"2025-{quarter}",
        description=f"The figures of {quarter.upper()} 2025.",
        mime_type="application/json",
    )
    def report() -> str:
        return json.dumps({"quarter": quarter, "year": 2025, "revenue": revenue})


for quarter, revenue in FIGURES.items():
    register(quarter, revenue)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def summarize(quarter: str) -> str:
    """One sentence about a quarter of 2025."""
    return f"{quarter.upper()} 2025 brought {FIGURES.get(quarter, 0)}k in revenue."


@server.prompt(description="Ask for a brief on one quarter of 2025.")
def quarter_brief(quarter: str, tone: str = "plain") -> str:
    return f"Write a {tone} brief on {quarter.upper()} 2025: {FIGURES.get(quarter, 0)}k in revenue."


if __name__ == "__main__":
    server.run()
