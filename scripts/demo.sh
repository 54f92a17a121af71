#!/usr/bin/env bash
# make demo: the drill environment, healthy at first, then a KV-cache-pressure incident: its
# golden signal (P99 LLM latency) crosses 1.2 s, and the alert goes pending, then firing.
# Ctrl-C stops the live view; everything the drill started is stopped on the way out.
# DEMO_REFRESHES=N: a bounded run (N refreshes of the signals, then the alerts once).
set -uo pipefail
cd "$(dirname "$0")/.."
ONCALL=.venv/bin/oncall
DIR=${DEMO_DIR:-.drill}
SCENARIO=${DEMO_SCENARIO:-kv-cache-pressure}

$ONCALL drill down --dir "$DIR" >/dev/null 2>&1
trap '$ONCALL drill down --dir "$DIR" >/dev/null && echo "demo: drill stopped"' EXIT
# Alert `for` durations x 0.05: the 2m of the P99 alert become 6s.
$ONCALL drill up --dir "$DIR" --for-scale 0.05 || exit 1
echo
echo "demo: healthy traffic for 20 s (golden signals vs thresholds), then: oncall drill inject $SCENARIO"
# A Ctrl-C ends a live view with status 130: leave (the EXIT trap stops the drill).
$ONCALL drill watch --dir "$DIR" --count 10 --interval 2 || exit 0
$ONCALL drill inject "$SCENARIO" --dir "$DIR" || exit 1
if [ -n "${DEMO_REFRESHES:-}" ]; then
    $ONCALL drill watch --dir "$DIR" --count "$DEMO_REFRESHES" --interval 2 || exit 0
    $ONCALL --config "$DIR/oncall.yaml" alerts
    exit 0
fi
echo "demo: the golden alerts live: LLMHighP99Latency goes PENDING, then FIRING; Ctrl-C to stop"
$ONCALL --config "$DIR/oncall.yaml" alerts --watch || exit 0
