"""A traced MCP client of the official Python SDK, for tests/mcp/traces.rs: with
OpenTelemetry's SDK recording its spans and sending them over OTLP (the standard
OTEL_EXPORTER_OTLP_* variables say where), it calls a tool of a server over streamable
HTTP inside a span of its own, `review {tool}`; the SDK makes the call's client span and
sends its `traceparent` in the request's `_meta`. Prints one JSON object: the trace id
and the ids of its own span ("trace_id", "span_id", in hex), and the call's
"structured" content and "is_error".

    traced_client.py --url URL --token T --era legacy|modern TOOL ARGUMENTS_JSON
"""

import argparse
import asyncio
import json
import warnings

warnings.simplefilter("ignore")

from opentelemetry import trace  # noqa: E402
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402

from mcp import Client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared._httpx_utils import create_mcp_http_client  # noqa: E402


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--era", choices=["legacy", "modern"], required=True)
    parser.add_argument("tool")
    parser.add_argument("arguments")
    args = parser.parse_args()
    # Resource attributes (the project) come from OTEL_RESOURCE_ATTRIBUTES.
    provider = TracerProvider(resource=Resource.create({"service.name": "traced-client"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    tracer = trace.get_tracer("traced-client")
    headers = {"Authorization": f"Bearer {args.token}"}
    server = streamable_http_client(args.url, http_client=create_mcp_http_client(headers=headers))
    mode = "legacy" if args.era == "legacy" else "2026-07-28"
    out = {}
    with tracer.start_as_current_span(f"review {args.tool}") as span:
        context = span.get_span_context()
        out["trace_id"] = format(context.trace_id, "032x")
        out["span_id"] = format(context.span_id, "016x")
        async with Client(server, mode=mode, cache=None) as client:
            result = await client.call_tool(args.tool, json.loads(args.arguments))
            out["structured"] = result.structured_content
            out["is_error"] = bool(result.is_error)
    provider.force_flush()
    provider.shutdown()
    print(json.dumps(out))


asyncio.run(main())
