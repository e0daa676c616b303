#!/usr/bin/env python3
"""SHA-256 of a binary resource.

stdin: {"archive": "<base64 bytes>"}
stdout: "<hex digest>"
"""
import base64
import hashlib
import json
import sys


def main() -> None:
    params = json.load(sys.stdin)
    data = base64.b64decode(params["archive"])
    json.dump(hashlib.sha256(data).hexdigest(), sys.stdout)


if __name__ == "__main__":
    main()
