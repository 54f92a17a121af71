#!/usr/bin/env bash
# make demo: the drill environment, healthy at first, then a KV-cache-pressure incident whose
# golden signal (P99 LLM latency) crosses its alert threshold within about a minute.
# Ctrl-C stops the live view; everything the drill started is stopped on the way out.
# DEMO_REFRESHES=N ends the live view after N refreshes (0, the default: until Ctrl-C).
set -uo pipefail
cd "$(dirname "$0")/.."
ONCALL=.venv/bin/oncall
DIR=${DEMO_DIR:-.drill}
SCENARIO=${DEMO_SCENARIO:-kv-cache-pressure}

$ONCALL drill down --dir "$DIR" >/dev/null 2>&1
trap '$ONCALL drill down --dir "$DIR" >/dev/null && echo "demo: drill stopped"' EXIT
$ONCALL drill up --dir "$DIR" || exit 1
echo
echo "demo: healthy traffic for 20 s, then: oncall drill inject $SCENARIO"
# A Ctrl-C ends the live view with status 130: leave (the EXIT trap stops the drill).
$ONCALL drill watch --dir "$DIR" --count 10 --interval 2 || exit 0
$ONCALL drill inject "$SCENARIO" --dir "$DIR" || exit 1
echo "demo: watch the P99 LLM latency cross 1.2 s (kv-cache-pressure); Ctrl-C to stop"
$ONCALL drill watch --dir "$DIR" --count "${DEMO_REFRESHES:-0}" --interval 2 || exit 0
