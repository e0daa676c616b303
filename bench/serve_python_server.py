"""The resources pipec's serve benchmark reads, served by the official Python SDK
(MCPServer) over stdio: a small fixed text resource, and the files of a folder by a
template, the same ones `pipec serve` serves from bench/serve_site.pipe.

    BENCH_ROOT=DIR python3 bench/serve_python_server.py
"""

import os
import pathlib

from mcp.server.mcpserver import MCPServer

root = pathlib.Path(os.environ["BENCH_ROOT"]).resolve()
server = MCPServer("bench", log_level="WARNING")


@server.resource("file:///bench/readme", mime_type="text/plain")
def readme() -> str:
    return "A small resource of the serve benchmark."


@server.resource("file:///bench/files/{name}", mime_type="text/plain")
def files(name: str) -> str:
    path = (root / name).resolve()
    if root not in path.parents:
        raise ValueError("outside the root")
    return path.read_text(encoding="utf-8")


if __name__ == "__main__":
    server.run()
