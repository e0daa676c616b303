// The official MCP TypeScript SDK's server (v2 line, @modelcontextprotocol/server, which
// speaks the 2026-07-28 revision) serving the small resource of bench/serve_load.sh over
// streamable HTTP, for the load comparison with `pipec serve --http`.
//
//     node serve_ts_server.mjs MODULES PORT TOKEN URI TEXT
//
// MODULES is the node_modules folder the SDK is installed in (target/serve-load-ts/...);
// PORT the loopback port to listen on (0 for any: the chosen one is printed); TOKEN the
// bearer token every request must carry, as pipec's does; URI and TEXT the resource, served
// as `text/plain`. Prints `listening on URL` once it accepts requests.
//
// The SDK's recommended setup for plain `node:http`, in one process: `createMcpHandler`
// (a fresh `McpServer` per request from one factory: the SDK's stateless serving, where
// 2026-07-28 requests carry their era in `_meta` and need no session), wrapped with
// `toNodeHandler`, behind the `Host`/`Origin` guards the SDK's README puts in front of a
// hand-wired server and a bearer token check, the same checks pipec makes. Nothing is
// logged per request.

import http from "node:http";
import { createRequire } from "node:module";
import { join } from "node:path";

const [modules, port, token, URI, TEXT] = process.argv.slice(2);
if (!modules || port === undefined || !token || !URI || TEXT === undefined) {
  console.error("usage: node serve_ts_server.mjs MODULES PORT TOKEN URI TEXT");
  process.exit(2);
}
// The SDK is installed under target/, not beside this script: load it from there.
const require = createRequire(join(modules, "noop.js"));
const { McpServer, createMcpHandler } = await import(
  require.resolve("@modelcontextprotocol/server")
);
const { toNodeHandler, localhostHostValidation, localhostOriginValidation } = await import(
  require.resolve("@modelcontextprotocol/node")
);

function factory() {
  const server = new McpServer({ name: "serve-load-ts", version: "1.0.0" });
  server.registerResource("readme", URI, { mimeType: "text/plain" }, async (uri) => ({
    contents: [{ uri: uri.href, mimeType: "text/plain", text: TEXT }],
  }));
  return server;
}

const handler = toNodeHandler(createMcpHandler(factory));
const validateHost = localhostHostValidation();
const validateOrigin = localhostOriginValidation();
const expected = `Bearer ${token}`;

const server = http.createServer((req, res) => {
  if (!validateHost(req, res) || !validateOrigin(req, res)) {
    return;
  }
  if (req.headers.authorization !== expected) {
    res.writeHead(401, { "content-type": "text/plain", "www-authenticate": "Bearer" });
    res.end("unauthorized\n");
    return;
  }
  if (req.url !== "/mcp") {
    res.writeHead(404).end();
    return;
  }
  handler(req, res).catch((error) => {
    console.error(`serve_ts_server: ${error}`);
    if (!res.headersSent) {
      res.writeHead(500);
    }
    res.end();
  });
});
// Node's defaults keep each connection open between requests, as pipec does, so wrk's 64
// connections stay 64 connections on both sides.
server.listen(Number(port), "127.0.0.1", () => {
  console.log(`listening on http://127.0.0.1:${server.address().port}/mcp`);
});
for (const signal of ["SIGTERM", "SIGINT"]) {
  process.on(signal, () => process.exit(0));
}
