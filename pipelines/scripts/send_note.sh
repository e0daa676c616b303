#!/bin/sh
# Sends a note: appends it to .pipec/outbox.jsonl under the project root (the working
# directory of exec nodes). An effect: pipec journals it and never repeats it silently.
# A call that is run again (`pipec resume --retry-unfinished` after a crash) has the same
# PIPEC_CALL_KEY: a note already in the outbox under that key is not sent twice.
input=$(cat)
mkdir -p .pipec
subject=$(printf '%s' "$input" | sed -n 's/.*"subject":"\([^"]*\)".*/\1/p')
if ! grep -qs "\"key\":\"$PIPEC_CALL_KEY\"" .pipec/outbox.jsonl; then
  printf '{"key":"%s","thread":"%s","input":%s}\n' "$PIPEC_CALL_KEY" "$PIPEC_THREAD" "$input" >> .pipec/outbox.jsonl
fi
printf '{"sent":true,"subject":"%s"}\n' "$subject"
