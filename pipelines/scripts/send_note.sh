#!/bin/sh
# Sends a note: appends it to .pipec/outbox.jsonl under the project root (the working
# directory of exec nodes). An effect: pipec journals it and never repeats it silently.
input=$(cat)
mkdir -p .pipec
printf '{"key":"%s","thread":"%s","input":%s}\n' "$PIPEC_CALL_KEY" "$PIPEC_THREAD" "$input" >> .pipec/outbox.jsonl
subject=$(printf '%s' "$input" | sed -n 's/.*"subject":"\([^"]*\)".*/\1/p')
printf '{"sent":true,"subject":"%s"}\n' "$subject"
