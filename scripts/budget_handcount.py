#!/usr/bin/env python3
"""A count of deal_research's worst-case prompts made without pipec's budget code, to hold
`pipec budget` against (README, "pipec budget").

It renders each model node's template with Jinja2 over values built by hand at their
largest (a capped resource filled with the same prose pipec assumes, up to its
`max_bytes` as JSON; the widest 64-bit integer; an unbounded string left empty), splits
the messages on the role markers as the runtime does, and counts every part with OpenAI's
own Python tokenizer (tiktoken): the messages with the chat format's 3 tokens a message
and 3 for the reply, the strict output schema as the response format, the tools as the
chat API lists them, and the 16,384-token largest reply of gpt-4o-mini. For a capped list
it renders both ends of the trade (one item holding all the text; as many empty items as
fit) and keeps the larger.

Needs: pip install tiktoken jinja2, and TIKTOKEN_CACHE_DIR holding o200k_base (offline).
Usage: scripts/budget_handcount.py PLAN.json (from `pipec compile pipelines/deal_research.pipe`)
"""

import copy
import json
import sys

import jinja2
import tiktoken

ENC = tiktoken.get_encoding("o200k_base")
REPLY = 16_384  # gpt-4o-mini's largest reply, as OpenAI publishes it
PROSE = (
    "The customer asked whether the new contract could start at the beginning of next "
    "quarter, since their finance team closes the budget in March. We agreed to send a "
    "revised proposal with two options: a yearly plan with a discount for paying up front, "
    "and a monthly plan that can be cancelled with thirty days of notice. Their security "
    "team still has questions about where the data is stored and who can read it, so the "
    "next call should include someone who can answer those in detail. The renewal is not at "
    "risk, but the champion is leaving the company in the summer, and nobody else there "
    "knows the history of the account. Please make sure the handover notes are written "
    "before then, and that the new contact is invited to the quarterly review. Usage has "
    "grown steadily over the last six months, mostly in the reporting features, and two "
    "teams asked for training sessions. One support ticket about slow exports is still "
    "open; engineering expects a fix in the next release, which ships in about three "
    "weeks.\n"
)
INT_MIN = -9223372036854775808
MARK = "\x1e"


def tokens(text):
    return len(ENC.encode(text))


def fill(nbytes):
    """Prose of exactly `nbytes` bytes (ASCII)."""
    reps = nbytes // len(PROSE) + 1
    return (PROSE * reps)[:nbytes]


def json_len(value):
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def filled(value, setter, cap):
    """`value` with the string `setter` writes grown until its JSON is `cap` bytes."""
    setter(value, "")
    text = fill(cap - json_len(value))
    setter(value, text)
    # A newline is two bytes in JSON (`\\n`): shorten until the value is within its cap.
    while json_len(value) > cap:
        text = text[: len(text) - (json_len(value) - cap)]
        setter(value, text)
    return value


def as_many_as_fit(shell, key, empty, cap):
    v = copy.deepcopy(shell)
    v[key] = []
    per = json_len(empty) + 1
    n = (cap - json_len(v) + 1) // per
    v[key] = [copy.deepcopy(empty) for _ in range(n)]
    assert json_len(v) <= cap
    return v


def close(schema, strict):
    if isinstance(schema, dict):
        if schema.get("type") == "object" and "properties" in schema:
            schema["additionalProperties"] = False
            if strict:
                schema["required"] = list(schema["properties"].keys())
        for v in schema.values():
            close(v, strict)
    elif isinstance(schema, list):
        for v in schema:
            close(v, strict)


def full_schema(defs, schema):
    root = copy.deepcopy(schema)
    d = copy.deepcopy(defs)
    close(root, True)
    close(d, True)
    if d:
        root["$defs"] = d
    return root


def reached(schema, defs, out):
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            name = ref[len("#/$defs/"):]
            if name in defs and name not in out:
                out.add(name)
                reached(defs[name], defs, out)
        for v in schema.values():
            reached(v, defs, out)
    elif isinstance(schema, list):
        for v in schema:
            reached(v, defs, out)


def shown_schema(defs, schema):
    names = set()
    reached(schema, defs, names)
    root = copy.deepcopy(schema)
    if names:
        root["$defs"] = {n: defs[n] for n in sorted(names)}
    return root


def pretty(v):
    # serde_json's pretty printer: two spaces, keys in order (its maps are sorted).
    return json.dumps(v, indent=2, separators=(",", ": "), sort_keys=True, ensure_ascii=False)


def compact(v):
    return json.dumps(v, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def messages_tokens(text):
    parts = text.split(MARK)
    bodies = [parts[0]] + [parts[i + 1] for i in range(1, len(parts) - 1, 2)]
    bodies = [b.strip() for b in bodies if b.strip()]
    return sum(tokens(b) + 3 for b in bodies) + 3


def render(source, values):
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    env.globals["role"] = lambda r: f"{MARK}{r}{MARK}"
    return env.from_string(source).render(**values)


def node_count(plan, name, scenarios):
    node = next(n for n in plan["nodes"] if n["name"] == name)
    defs = plan["$defs"]
    body = node["body"]
    source = body["prompt"]["sources"][body["prompt"]["entry"]]
    schema = full_schema(defs, node["output"])
    reply_format = tokens(compact(schema))
    tool_list = []
    for t in body.get("tools", []):
        tool = next(x for x in plan["tools"] if x["name"] == t)
        tool_list.append({
            "type": "function",
            "function": {
                "name": tool["name"],
                "description": tool.get("description"),
                "parameters": shown_schema(defs, tool["input_schema"]),
            },
        })
    tools = tokens(compact(tool_list)) if tool_list else 0
    best = 0
    for values in scenarios:
        values = dict(values, output_schema=pretty(schema))
        best = max(best, messages_tokens(render(source, values)))
    return best + reply_format + tools + REPLY


def main():
    plan = json.load(open(sys.argv[1]))
    activity = {"at": "", "kind": "", "by": "", "summary": ""}
    email = {"id": "", "date": "", "from": "", "to": "", "subject": "", "body": ""}

    def one_activity(cap):
        v = {"deal_id": "", "activity": [dict(activity)]}
        return filled(v, lambda x, s: x["activity"][0].__setitem__("summary", s), cap)

    def many_activities(cap):
        return as_many_as_fit({"deal_id": ""}, "activity", activity, cap)

    def one_email(cap):
        v = {"deal_id": "", "start": "", "end": "", "count": 0, "emails": [dict(email)]}
        v = filled(v, lambda x, s: x["emails"][0].__setitem__("subject", s), cap)
        v["count"] = INT_MIN  # printed at its widest; its bytes are the cap's either way
        return v

    def many_emails(cap):
        v = as_many_as_fit({"deal_id": "", "start": "", "end": "", "count": 0}, "emails", email, cap)
        v["count"] = INT_MIN
        return v

    research = node_count(plan, "research", [
        {"deal_id": "", "dossier": d} for d in (one_activity(50_000), many_activities(50_000))
    ])
    digest = {"deal_id": "", "events": INT_MIN}
    consume = node_count(plan, "consume", [
        {"digest": digest, "history": h, "recent": r}
        for h in (one_email(200_000), many_emails(200_000))
        for r in (one_activity(50_000), many_activities(50_000))
    ])
    print(json.dumps({"research": research, "consume": consume}))


if __name__ == "__main__":
    main()
