"""An MCP client of the official Python SDK that drives `pipec serve` for the serve
interop tests and prints what it saw as one JSON object.

    serve_client.py --era legacy|modern (--stdio PROGRAM ARG... | --url URL [--token T]) PLAN

PLAN is JSON: {"read": [URI, ...], "subscribe": {"uri": URI, "file": PATH, "changes": N},
"edit": {"file": PATH, "text": TEXT}, "pipeline": {"tool": NAME, "arguments": {...},
"gate": GATE, "answer": VALUE}, "complete": {"template": T, "argument": NAME, "value": V},
"background": {"tool": NAME, "arguments": {...}}, "ping": true, "subscribe_all": [URI, ...],
"calls": [{"tool": NAME, "arguments": {...}}, ...], "log_call": {"tool": NAME, "arguments":
{...}}, "progress_call": {"tool": NAME,
"arguments": {...}}, "prompts": [{"name": NAME, "arguments":
{...}}, ...], "complete_prompt": {"prompt": NAME, "argument": ARG, "value": V}, "hold": true}.
The output has "resources" and "templates" (as listed), "reads" (each URI's contents, or
its error's code and message) and, for a subscription, "updates" (how many notices each
change of the file brought) and "after_unsubscribe" (notices after the subscription
ended, while the file changed again); for an edit, "list_changed" (the list-changed
notices the edit brought) and "resources_after" (the resources listed after it); for a
pipeline, "tools" (as listed), "call" (the tool's result), "run_paused" (the run read
through the link the call returned), "resume" (resume_run's result), "run_updates" (the
notices the subscribed run sent while it was resumed) and "run_done" (the run read
after them); for a completion, "completion" (the values); for a background run,
"background" (the call's result) and "statuses" (the run's status, read until it
completed); for a ping (sent first), "ping" ("ok" or the error); for "subscribe_all", what
subscribing to the URIs answered ("ok" or the error: one per URI in the legacy era, one
listen for all of them in the 2026-07-28 era); for "calls", each call's result or error;
for "log_call" ({"tool", "arguments"}, called after asking for logs at info), the
call's result, "logs" (the log notifications heard) and "logs_before_asking" (how many
came before); for "progress_call" ({"tool", "arguments"}), the call's result and "progress" (the
progress notifications heard before it); for "prompts", "prompt_list" (as listed) and "prompt_gets" (each prompt's messages or
error); for "complete_prompt", "prompt_completion" (the values).
With "hold", the client prints its output and then waits, subscriptions held, until it
is killed.
"""

import argparse
import asyncio
import json
import os
import sys
import warnings

warnings.simplefilter("ignore")

import mcp_types as types  # noqa: E402
from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared._httpx_utils import create_mcp_http_client  # noqa: E402

NOTICE_WAIT = 5.0
SETTLE = 0.25


def dump(model):
    return model.model_dump(mode="json", exclude_none=True, by_alias=True)


def touch(path, n):
    with open(path, "a", encoding="utf-8") as f:
        f.write(f"change {n}\n")


async def subscribe_legacy(client, counts, plan, out):
    uri, path, changes = plan["uri"], plan["file"], plan["changes"]
    await client.subscribe_resource(uri)
    per_change = []
    for n in range(changes):
        before = counts.get(uri, 0)
        touch(path, n)
        deadline = asyncio.get_running_loop().time() + NOTICE_WAIT
        while counts.get(uri, 0) == before and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.005)
        await asyncio.sleep(SETTLE)
        per_change.append(counts.get(uri, 0) - before)
    out["updates"] = per_change
    await client.unsubscribe_resource(uri)
    before = counts.get(uri, 0)
    touch(path, "after")
    await asyncio.sleep(SETTLE * 2)
    out["after_unsubscribe"] = counts.get(uri, 0) - before


async def subscribe_modern(client, plan, out):
    uri, path, changes = plan["uri"], plan["file"], plan["changes"]
    per_change = []
    async with client.listen(resource_subscriptions=[uri]) as sub:
        out["honored"] = list(sub.honored.resource_subscriptions or []) if sub.honored else []
        events = sub.__aiter__()
        for n in range(changes):
            touch(path, n)
            got = 0
            try:
                event = await asyncio.wait_for(events.__anext__(), NOTICE_WAIT)
                if getattr(event, "uri", None) == uri:
                    got += 1
            except asyncio.TimeoutError:
                pass
            # Anything more for this change arrives within the settle time.
            try:
                while True:
                    event = await asyncio.wait_for(events.__anext__(), SETTLE)
                    if getattr(event, "uri", None) == uri:
                        got += 1
            except asyncio.TimeoutError:
                pass
            per_change.append(got)
    out["updates"] = per_change
    # The subscription is closed: a change now reaches nobody (nothing to count on this
    # side but that the connection stays quiet and usable).
    touch(path, "after")
    await asyncio.sleep(SETTLE * 2)
    out["after_unsubscribe"] = 0


def write(path, text):
    aside = path + ".new"
    with open(aside, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(aside, path)


async def edit(client, counts, plan, era, out):
    if era == "legacy":
        write(plan["file"], plan["text"])
        deadline = asyncio.get_running_loop().time() + NOTICE_WAIT
        while counts.get("<lists>", 0) == 0 and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.005)
        await asyncio.sleep(SETTLE)
        out["list_changed"] = counts.get("<lists>", 0)
    else:
        got = 0
        async with client.listen(resources_list_changed=True) as sub:
            events = sub.__aiter__()
            write(plan["file"], plan["text"])
            try:
                await asyncio.wait_for(events.__anext__(), NOTICE_WAIT)
                got += 1
                while True:
                    await asyncio.wait_for(events.__anext__(), SETTLE)
                    got += 1
            except asyncio.TimeoutError:
                pass
        out["list_changed"] = got
    out["resources_after"] = [dump(r) for r in (await client.list_resources()).resources]


def tool_result(r):
    return {
        "isError": bool(r.is_error),
        "structured": r.structured_content,
        "links": [b.uri for b in r.content if getattr(b, "type", "") == "resource_link"],
        "text": " ".join(b.text for b in r.content if getattr(b, "type", "") == "text"),
        "blocks": [dump(b) for b in r.content if getattr(b, "type", "") in ("image", "audio", "resource")],
    }


async def read_json(client, uri):
    r = await client.read_resource(uri)
    return json.loads(r.contents[0].text)


async def pipeline(client, counts, plan, era, out):
    out["tools"] = [dump(t) for t in (await client.list_tools()).tools]
    call = tool_result(await client.call_tool(plan["tool"], plan["arguments"]))
    out["call"] = call
    if not call["links"]:
        return
    link = call["links"][0]
    out["run_paused"] = await read_json(client, link)
    thread = out["run_paused"]["thread"]
    arguments = {"thread": thread, "gate": plan["gate"], "answer": plan["answer"]}
    if era == "legacy":
        await client.subscribe_resource(link)
        before = counts.get(link, 0)
        out["resume"] = tool_result(await client.call_tool("resume_run", arguments))
        deadline = asyncio.get_running_loop().time() + NOTICE_WAIT
        while counts.get(link, 0) == before and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.005)
        out["run_updates"] = counts.get(link, 0) - before
    else:
        got = 0
        async with client.listen(resource_subscriptions=[link]) as sub:
            events = sub.__aiter__()
            out["resume"] = tool_result(await client.call_tool("resume_run", arguments))
            try:
                await asyncio.wait_for(events.__anext__(), NOTICE_WAIT)
                got += 1
            except asyncio.TimeoutError:
                pass
        out["run_updates"] = got
    out["run_done"] = await read_json(client, link)


def error_of(e):
    # A listen the server ended with an error is lost "from" that error.
    if getattr(e, "error", None) is None and getattr(e.__cause__, "error", None) is not None:
        e = e.__cause__
    error = getattr(e, "error", None)
    return {"code": getattr(error, "code", None), "message": getattr(error, "message", str(e))}


async def subscribe_all(client, uris, era, out, held):
    if era == "legacy":
        answers = []
        for uri in uris:
            try:
                await client.subscribe_resource(uri)
                answers.append("ok")
            except Exception as e:  # the error the server answered
                answers.append(error_of(e))
        out["subscribe_all"] = answers
        return
    listen = client.listen(resource_subscriptions=uris)
    try:
        sub = await listen.__aenter__()
        held.append(listen)
        honored = list(sub.honored.resource_subscriptions or []) if sub.honored else []
        # A listen the server refused after acknowledging it ends with its error.
        events = sub.__aiter__()
        try:
            await asyncio.wait_for(events.__anext__(), SETTLE)
        except asyncio.TimeoutError:
            pass
        except StopAsyncIteration:
            pass
        out["subscribe_all"] = "ok" if honored == uris else {"honored": honored}
    except Exception as e:  # the error the server answered
        out["subscribe_all"] = error_of(e)


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--era", choices=["legacy", "modern"], required=True)
    parser.add_argument("--url")
    parser.add_argument("--token")
    parser.add_argument("--stdio", nargs=argparse.REMAINDER)
    parser.add_argument("plan", nargs="?")
    args = parser.parse_args()
    if args.stdio:
        plan = json.loads(args.stdio[-1])
        server = StdioServerParameters(command=args.stdio[0], args=args.stdio[1:-1], env=dict(os.environ))
    else:
        plan = json.loads(args.plan)
        headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
        # The SDK's own client, with its timeouts: a notification stream may be quiet
        # for long.
        server = streamable_http_client(args.url, http_client=create_mcp_http_client(headers=headers))
    counts = {}

    async def on_message(message):
        root = getattr(message, "root", message)
        method = getattr(root, "method", None)
        if method == "notifications/resources/updated":
            uri = root.params.uri
            counts[uri] = counts.get(uri, 0) + 1
        elif method == "notifications/resources/list_changed":
            counts["<lists>"] = counts.get("<lists>", 0) + 1

    mode = "legacy" if args.era == "legacy" else "2026-07-28"
    out = {}
    logs = []

    async def on_log(params):
        logs.append({"level": params.level, "logger": params.logger, "data": params.data})

    # A request of the 2026-07-28 era opts in to logs by its level; a legacy session sets
    # one (below) before its "log_call".
    log_level = "info" if "log_call" in plan and args.era == "modern" else None
    async with Client(
        server, mode=mode, message_handler=on_message, cache=None, logging_callback=on_log, log_level=log_level
    ) as client:
        out["protocol"] = client.session.protocol_version
        if "ping" in plan:
            # First, before any other request: over stdio that is before the era is
            # settled, when a server may still answer a ping of any era.
            try:
                await client.send_ping()
                out["ping"] = "ok"
            except Exception as e:  # the error the server answered
                out["ping"] = error_of(e)
        out["resources"] = [dump(r) for r in (await client.list_resources()).resources]
        out["templates"] = [dump(t) for t in (await client.list_resource_templates()).resource_templates]
        reads = {}
        for uri in plan.get("read", []):
            try:
                result = await client.read_resource(uri)
                reads[uri] = {"contents": [dump(c) for c in result.contents]}
            except Exception as e:  # the error the server answered
                error = getattr(e, "error", None)
                reads[uri] = {
                    "error": {
                        "code": getattr(error, "code", None),
                        "message": getattr(error, "message", str(e)),
                    }
                }
        out["reads"] = reads
        if "subscribe" in plan:
            if args.era == "legacy":
                await subscribe_legacy(client, counts, plan["subscribe"], out)
            else:
                await subscribe_modern(client, plan["subscribe"], out)
        if "complete" in plan:
            c = plan["complete"]
            ref = types.ResourceTemplateReference(type="ref/resource", uri=c["template"])
            done = await client.complete(ref=ref, argument={"name": c["argument"], "value": c["value"]})
            out["completion"] = list(done.completion.values)
        if "background" in plan:
            b = plan["background"]
            call = tool_result(await client.call_tool(b["tool"], b["arguments"]))
            out["background"] = call
            statuses = []
            for _ in range(200):
                if not call["links"]:
                    break
                status = (await read_json(client, call["links"][0]))["status"]
                if not statuses or statuses[-1] != status:
                    statuses.append(status)
                if status == "completed":
                    break
                await asyncio.sleep(0.05)
            out["statuses"] = statuses
        held = []
        if "subscribe_all" in plan:
            await subscribe_all(client, plan["subscribe_all"], args.era, out, held)
        if "calls" in plan:
            calls = []
            for c in plan["calls"]:
                try:
                    calls.append(tool_result(await client.call_tool(c["tool"], c["arguments"])))
                except Exception as e:  # the error the server answered
                    calls.append({"error": error_of(e)})
            out["calls"] = calls
        if "progress_call" in plan:
            c = plan["progress_call"]
            heard = []

            async def on_progress(progress, total, message):
                heard.append({"progress": progress, "total": total, "message": message})

            result = await client.call_tool(c["tool"], c["arguments"], progress_callback=on_progress)
            out["progress_call"] = tool_result(result)
            out["progress"] = heard
        if "log_call" in plan:
            c = plan["log_call"]
            unasked = len(logs)
            if args.era == "legacy":
                await client.set_logging_level("info")
            out["log_call"] = tool_result(await client.call_tool(c["tool"], c["arguments"]))
            out["logs_before_asking"] = unasked
            out["logs"] = logs[unasked:]
        if "prompts" in plan:
            out["prompt_list"] = [dump(p) for p in (await client.list_prompts()).prompts]
            gets = []
            for p in plan["prompts"]:
                try:
                    got = await client.get_prompt(p["name"], p.get("arguments"))
                    gets.append({"messages": [dump(m) for m in got.messages], "description": got.description})
                except Exception as e:  # the error the server answered
                    gets.append({"error": error_of(e)})
            out["prompt_gets"] = gets
        if "complete_prompt" in plan:
            c = plan["complete_prompt"]
            ref = types.PromptReference(type="ref/prompt", name=c["prompt"])
            done = await client.complete(ref=ref, argument={"name": c["argument"], "value": c["value"]})
            out["prompt_completion"] = list(done.completion.values)
        if "pipeline" in plan:
            await pipeline(client, counts, plan["pipeline"], args.era, out)
        if "edit" in plan:
            await edit(client, counts, plan["edit"], args.era, out)
        if plan.get("hold"):
            print(json.dumps(out), flush=True)
            while True:
                await asyncio.sleep(3600)
        for listen in held:
            await listen.__aexit__(None, None, None)
    print(json.dumps(out))


asyncio.run(main())
