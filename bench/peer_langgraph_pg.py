"""The peer side of bench/pg_compare.sh: LangGraph's Postgres checkpointer on a given server.

Measures the durable cost of one step: a chain of no-op nodes run to completion with
`AsyncPostgresSaver`, per step, for LangGraph's two durable modes (`sync` writes each
checkpoint before the next step starts; `async` writes it beside the next step). A run
with `InMemorySaver` gives the floor of LangGraph itself, so the saver's own part is the
difference. Prints one JSON object: {"id": median, ...}.

    python bench/peer_langgraph_pg.py --url postgresql://... [--steps 100] [--runs 10]
"""

import argparse
import asyncio
import json
import statistics
import sys
import time
import uuid
from typing import TypedDict


class Count(TypedDict):
    n: int


def chain(steps: int):
    from langgraph.graph import END, START, StateGraph

    g = StateGraph(Count)

    def make():
        async def step(s: Count) -> dict:
            return {"n": s["n"] + 1}

        return step

    previous = START
    for i in range(steps):
        name = f"s{i}"
        g.add_node(name, make())
        g.add_edge(previous, name)
        previous = name
    g.add_edge(previous, END)
    return g


async def per_step(graph, steps: int, runs: int, durability: str) -> list[float]:
    out = []
    # One warm-up run: connections, prepared statements, imports.
    await graph.ainvoke({"n": 0}, {"configurable": {"thread_id": str(uuid.uuid4())}}, durability=durability)
    for _ in range(runs):
        cfg = {"configurable": {"thread_id": str(uuid.uuid4())}}
        t = time.perf_counter()
        result = await graph.ainvoke({"n": 0}, cfg, durability=durability)
        out.append((time.perf_counter() - t) * 1000 / steps)
        assert result["n"] == steps, result
    return out


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--runs", type=int, default=10)
    o = ap.parse_args()

    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    g = chain(o.steps)
    results = {}
    async with AsyncPostgresSaver.from_conn_string(o.url) as saver:
        await saver.setup()
        graph = g.compile(checkpointer=saver)
        for durability in ("sync", "async"):
            ms = await per_step(graph, o.steps, o.runs, durability)
            results[f"langgraph_pg.{durability}.step_ms"] = statistics.median(ms)
    graph = g.compile(checkpointer=InMemorySaver())
    ms = await per_step(graph, o.steps, o.runs, "sync")
    results["langgraph_memory.step_ms"] = statistics.median(ms)
    json.dump(results, sys.stdout)
    print()


if __name__ == "__main__":
    asyncio.run(main())
