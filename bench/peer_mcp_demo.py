"""The Python peer's MCP measurements (section d of bench_langgraph.py), run unchanged
but against pipec-demo-crm instead of the Python CRM server.

Against the Python server, every round trip includes that server's own work (pydantic,
json.dumps, its event loop), which both clients pay alike. pipec-demo-crm answers in a
few tens of microseconds, so against it a round trip is mostly what the client itself
costs: this runs the official Python SDK client against it, for the same figure on the
Python side that `cargo bench --bench mcp` gives for pipec's client (the `demo.*` rows).

    $PEER_VENV/bin/python bench/peer_mcp_demo.py --demo target/release/pipec-demo-crm \
        [--peer-dir ../shared/peers] [--quick] [--out FILE]

Rows are the peer's own, renamed from `d.*` to `demo.*`.
"""

import argparse
import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--demo", required=True, help="the pipec-demo-crm binary")
    ap.add_argument("--peer-dir", default=os.environ.get("PEER_DIR", str(Path(__file__).resolve().parents[2] / "shared/peers")))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", help="where the results JSON goes")
    ap.add_argument("--emails", type=int, default=int(os.environ.get("CRM_EMAILS", "5000")))
    o = ap.parse_args()

    sys.path.insert(0, o.peer_dir)
    import bench_langgraph as peer  # the peer harness itself, not a copy of it
    from mcp import StdioServerParameters

    demo = str(Path(o.demo).resolve())

    def demo_server(n_emails: int):
        return StdioServerParameters(command=demo, args=[], env={"CRM_EMAILS": str(n_emails)})

    emit = peer.emit

    def renamed(mid: str, *args, **kwargs):
        return emit("demo." + mid.removeprefix("d."), *args, **kwargs)

    peer.server_params = demo_server
    peer.emit = renamed

    # The peer's own counts for section d (its main() sets them the same way).
    o.warmup = 1 if o.quick else 2
    o.session_runs = 3 if o.quick else 10
    o.mcp_calls = 20 if o.quick else 200
    o.corpus_runs = 3 if o.quick else 10

    with tempfile.TemporaryDirectory(prefix="peer-demo-") as tmp:
        asyncio.run(peer.bench_mcp(o, Path(tmp)))
    if o.out:
        Path(o.out).write_text(json.dumps({"meta": {"server": demo, "emails": o.emails}, "results": peer.RESULTS}, indent=1) + "\n")


if __name__ == "__main__":
    main()
