#!/usr/bin/env python3
"""The tag of the next release: the last tag with one part of its version raised.

stdin: {"since": "v1.4.0", "bump": "major" | "minor" | "patch"}
stdout: "v1.5.0"
A leading "v" is kept when the last tag has one; a pre-release or build suffix is dropped.
"""
import json
import re
import sys


def main() -> None:
    params = json.load(sys.stdin)
    since, bump = params["since"], params["bump"]
    m = re.fullmatch(r"(v?)(\d+)\.(\d+)\.(\d+)(?:[-+].*)?", since)
    if not m:
        sys.exit(f"`{since}` is not a version tag such as v1.4.0")
    prefix, major, minor, patch = m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4))
    if bump == "major":
        major, minor, patch = major + 1, 0, 0
    elif bump == "minor":
        minor, patch = minor + 1, 0
    else:
        patch += 1
    json.dump(f"{prefix}{major}.{minor}.{patch}", sys.stdout)


if __name__ == "__main__":
    main()
