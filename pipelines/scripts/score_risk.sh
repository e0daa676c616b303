#!/bin/sh
# Scores renewal risk from an account. Reads {"account": {...}} on stdin.
input=$(cat)
num() { printf '%s' "$input" | sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p"; }
seats=$(num seats)
tickets=$(num open_tickets)
active=$(printf '%s' "$input" | sed -n 's/.*"monthly_active":\[\([0-9,]*\)\].*/\1/p')
first=${active%%,*}
last=${active##*,}
score=$((tickets * 10))
reasons="\"$tickets open support tickets\""
if [ "$last" -lt "$first" ]; then
  score=$((score + 30))
  reasons="$reasons,\"active users fell from $first to $last\""
fi
if [ "$seats" -gt 100 ]; then
  score=$((score + 10))
  reasons="$reasons,\"a large account ($seats seats)\""
fi
if [ "$score" -ge 60 ]; then level=high; elif [ "$score" -ge 30 ]; then level=medium; else level=low; fi
printf '{"score":%d,"level":"%s","reasons":[%s]}\n' "$score" "$level" "$reasons"
