#!/usr/bin/env python3
"""Count triage decisions per category.

stdin: {"results": [Classification, ...]}
stdout: {"<category>": <count>, ...}, categories in first-seen order.
"""
import json
import sys


def main() -> None:
    params = json.load(sys.stdin)
    counts: dict[str, int] = {}
    for decision in params["results"]:
        category = decision["category"]
        counts[category] = counts.get(category, 0) + 1
    json.dump(counts, sys.stdout)


if __name__ == "__main__":
    main()
