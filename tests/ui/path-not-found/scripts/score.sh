#!/bin/sh
cat >/dev/null
echo "{\"score\": 1}"
