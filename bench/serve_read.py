"""Times `resources/read` against one MCP server with the official Python SDK's client,
over stdio or streamable HTTP, and prints one JSON line: reads per second and the median
and p95 in ms, for the small resource and for the 1 MB file.

    python3 bench/serve_read.py LABEL PROGRAM ARG...          # stdio: the client starts it
    python3 bench/serve_read.py LABEL --http URL TOKEN        # a server already listening

Over HTTP only the small resource is read: the SDK's HTTP client refuses an event of more
than 1 MiB, which the 1 MB file is once JSON-encoded.
"""

import asyncio
import json
import os
import statistics
import sys
import time
import warnings

warnings.simplefilter("ignore")

from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared._httpx_utils import create_mcp_http_client  # noqa: E402

SMALL, LARGE = 500, 40


async def timed(client, uri, n):
    for _ in range(5):  # warm-up
        await client.read_resource(uri)
    times = []
    start = time.perf_counter()
    for _ in range(n):
        t = time.perf_counter()
        await client.read_resource(uri)
        times.append((time.perf_counter() - t) * 1000)
    total = time.perf_counter() - start
    times.sort()
    return {
        "reads_per_s": n / total,
        "median_ms": statistics.median(times),
        "p95_ms": times[int(len(times) * 0.95) - 1],
    }


async def main():
    label, program, *args = sys.argv[1:]
    if program == "--http":
        url, token = args
        headers = {"Authorization": f"Bearer {token}"}
        server = streamable_http_client(url, http_client=create_mcp_http_client(headers=headers))
    else:
        server = StdioServerParameters(command=program, args=args, env=dict(os.environ))
    async with Client(server, mode="legacy", cache=None) as client:
        small = await timed(client, "file:///bench/readme", SMALL)
        # The SDK's HTTP client takes no event past 1 MiB, the 1 MB file's size as JSON.
        large = None if program == "--http" else await timed(client, "file:///bench/files/large.txt", LARGE)
    print(json.dumps({"server": label, "small": small, "large_1mb": large}))


asyncio.run(main())
