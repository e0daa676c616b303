"""A payments server that asks a person before it pays, with the official Python SDK
(mcp 2.x, MCPServer and its `Resolve(Elicit(...))` resolvers), for pipec's tests of
elicitation as durable gates.

On 2026-07-28 the questions come back as an `input_required` result whose
`requestState` the SDK seals with a key of this process; on 2025-11-25 they would be
`elicitation/create` requests sent in the middle of the call.

What it offers
  tool pay(amount, to)       asks "Pay AMOUNT to TO?" (confirm: bool, note?: str); pays
                             when confirmed, says so when not
  tool pay_twice(amount, to) asks the same, then asks for a reference (two rounds)
  tool describe(to)          asks the client's model (sampling) to describe `to`

Environment
  PAYMENTS_TOKEN   when set, the description of the form's `note` field

Options
  --log FILE    append one JSON line per payment made and per question asked
  --slow SECS   wait this long after the answers, before paying (a window to kill a client)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("--log")
parser.add_argument("--slow", type=float, default=0.0)
options = parser.parse_args()

from typing import Annotated  # noqa: E402

from pydantic import BaseModel, Field  # noqa: E402

from mcp.server.mcpserver import (  # noqa: E402
    AcceptedElicitation,
    Elicit,
    ElicitationResult,
    MCPServer,
    Resolve,
    Sample,
)
from mcp.types import CreateMessageResult, SamplingMessage, TextContent  # noqa: E402

server = MCPServer("payments", log_level="WARNING")


def log(entry: dict) -> None:
    if options.log:
        with open(options.log, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")


class Confirm(BaseModel):
    confirm: bool
    # A server may echo what it was given into its forms (here its PAYMENTS_TOKEN, when
    # set): a client must not keep it.
    note: str | None = Field(None, description=os.environ.get("PAYMENTS_TOKEN") or None)


class Reference(BaseModel):
    reference: str


def ask_confirm(amount: int, to: str) -> Elicit[Confirm]:
    log({"asked": "confirm", "amount": amount, "to": to})
    return Elicit(f"Pay {amount} to {to}?", Confirm)


def ask_reference(
    to: str, answer: Annotated[Confirm, Resolve(ask_confirm)]
) -> Elicit[Reference]:
    log({"asked": "reference", "to": to})
    return Elicit(f"Which reference goes with the payment to {to}?", Reference)


def paid(amount: int, to: str, extra: dict) -> str:
    if options.slow:
        time.sleep(options.slow)
    log({"paid": amount, "to": to, **extra})
    return f"paid {amount} to {to}"


@server.tool()
def pay(
    amount: int,
    to: str,
    answer: Annotated[ElicitationResult[Confirm], Resolve(ask_confirm)],
) -> str:
    """Pay someone, once a person confirms."""
    if not isinstance(answer, AcceptedElicitation):
        return f"not paid: {answer.action}"
    if not answer.data.confirm:
        return f"not paid: {answer.data.note or 'refused'}"
    return paid(amount, to, {"note": answer.data.note})


@server.tool()
def pay_twice(
    amount: int,
    to: str,
    answer: Annotated[Confirm, Resolve(ask_confirm)],
    reference: Annotated[Reference, Resolve(ask_reference)],
) -> str:
    """Pay someone, once a person confirms and gives a reference."""
    if not answer.confirm:
        return "not paid"
    return paid(amount, to, {"reference": reference.reference})


def ask_model(to: str) -> Sample:
    log({"asked": "model", "to": to})
    prompt = TextContent(type="text", text=f"Describe {to} in five words.")
    return Sample([SamplingMessage(role="user", content=prompt)], max_tokens=50)


@server.tool()
def describe(
    to: str, reply: Annotated[CreateMessageResult, Resolve(ask_model)]
) -> str:
    """Describe a payee, in the client's model's words."""
    return f"{to}: {reply.content.text}"


if __name__ == "__main__":
    print("asking server ready", file=sys.stderr, flush=True)
    server.run()
