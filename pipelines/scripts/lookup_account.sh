#!/bin/sh
# Looks an account up. Reads {"account": "..."} on stdin, prints the account as JSON.
# The data is derived from the id, so every run gives the same answer.
input=$(cat)
id=$(printf '%s' "$input" | sed -n 's/.*"account":"\([^"]*\)".*/\1/p')
[ -n "$id" ] || { echo "no account id on stdin" >&2; exit 2; }
len=${#id}
seats=$((len * 25))
tickets=$((len % 5 + 2))
printf '{"id":"%s","name":"%s Corp","seats":%d,"open_tickets":%d,"monthly_active":[%d,%d,%d]}\n' \
  "$id" "$id" "$seats" "$tickets" "$((seats - 10))" "$((seats - 25))" "$((seats - 45))"
