#!/usr/bin/env python3
"""Numbers for the header of the release notes.

stdin: {"pulls": [PullSummary, ...], "notes": [PageNote, ...]}
stdout: {"pulls": int, "pages": int, "breaking_pages": int, "by_label": {label: count}}
Labels are counted once per pull request and sorted by count, then name.
"""
import json
import sys


def main() -> None:
    params = json.load(sys.stdin)
    pulls = params["pulls"]
    notes = params["notes"]
    by_label: dict[str, int] = {}
    for pull in pulls:
        for label in set(pull["labels"]):
            by_label[label] = by_label.get(label, 0) + 1
    ordered = dict(sorted(by_label.items(), key=lambda kv: (-kv[1], kv[0])))
    json.dump(
        {
            "pulls": len(pulls),
            "pages": len(notes),
            "breaking_pages": sum(1 for note in notes if note["breaking"]),
            "by_label": ordered,
        },
        sys.stdout,
    )


if __name__ == "__main__":
    main()
