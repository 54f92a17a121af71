#!/usr/bin/env bash
# make demo: the drill environment, healthy at first, then a KV-cache-pressure incident: its
# golden signal (P99 LLM latency) crosses 1.2 s and the alert goes pending, then firing. Then
# the app opens on the board, the tripped alert on top with its checklist's findings; quit it
# with `q`. Everything the drill started is stopped on the way out (also on Ctrl-C).
#
# Without a terminal (stdin or stdout not a tty), or with DEMO_NO_APP=1, the demo prints
# `oncall alerts` and `oncall check ALERT` instead of opening the app, and ends by itself.
# DEMO_SCENARIO (kv-cache-pressure), DEMO_DIR (.drill), DEMO_FIRE_TIMEOUT (seconds to wait for
# the alert to fire, 180).
set -uo pipefail
cd "$(dirname "$0")/.."
ONCALL=.venv/bin/oncall
PYTHON=.venv/bin/python
DIR=${DEMO_DIR:-.drill}
SCENARIO=${DEMO_SCENARIO:-kv-cache-pressure}
FIRE_TIMEOUT=${DEMO_FIRE_TIMEOUT:-180}
CONFIG="$DIR/oncall.yaml"

# The golden alert the scenario trips, from the drill's own list of scenarios.
ALERT=$($ONCALL drill scenarios -o json | $PYTHON -c '
import json, sys
found = [s["alert"] for s in json.load(sys.stdin) if s["name"] == sys.argv[1]]
print((found[0] or "") if found else "")' "$SCENARIO")
if [ -z "$ALERT" ]; then
    echo "demo: scenario $SCENARIO trips no alert (see: oncall drill scenarios)" >&2
    exit 2
fi

# The alert's state in one word, plus its countdown while pending ("pending, fires in 4s").
alert_state() {
    $ONCALL --config "$CONFIG" alerts -o json 2>/dev/null | $PYTHON -c '
import json, sys
try:
    alerts = json.load(sys.stdin)["alerts"]
except (ValueError, KeyError):
    alerts = []
found = [a for a in alerts if a["name"] == sys.argv[1]]
if not found:
    print("unknown")
elif found[0]["fires_in_s"] is not None:
    print("%s, fires in %.0fs" % (found[0]["state"], found[0]["fires_in_s"]))
else:
    print(found[0]["state"])' "$ALERT"
}

$ONCALL drill down --dir "$DIR" >/dev/null 2>&1
trap '$ONCALL drill down --dir "$DIR" >/dev/null && echo "demo: drill stopped"' EXIT
# Alert `for` durations x 0.05: the 2m of the P99 alert become 6s.
$ONCALL drill up --dir "$DIR" --for-scale 0.05 || exit 1
echo
echo "demo: healthy traffic for 20 s (golden signals vs thresholds), then: oncall drill inject $SCENARIO"
# A Ctrl-C ends a live view with status 130: leave (the EXIT trap stops the drill).
$ONCALL drill watch --dir "$DIR" --count 10 --interval 2 || exit 0
$ONCALL drill inject "$SCENARIO" --dir "$DIR" || exit 1

echo "demo: waiting for $ALERT to fire (at most ${FIRE_TIMEOUT}s)"
state=unknown
deadline=$((SECONDS + FIRE_TIMEOUT))
while [ "$SECONDS" -lt "$deadline" ]; do
    state=$(alert_state)
    echo "  $(date +%H:%M:%S)  $ALERT  $state"
    [ "$state" = firing ] && break
    sleep 2
done
if [ "$state" != firing ]; then
    echo "demo: $ALERT did not fire within ${FIRE_TIMEOUT}s; the alerts now:" >&2
    $ONCALL --config "$CONFIG" alerts
    exit 1
fi

if [ -t 0 ] && [ -t 1 ] && [ -z "${DEMO_NO_APP:-}" ]; then
    echo "demo: opening the app: enter opens $ALERT, p acts on a proposal, :audit, q quits"
    $ONCALL --config "$CONFIG"
    exit 0
fi
echo "demo: no terminal for the app (or DEMO_NO_APP): the same, headless"
echo
echo "\$ oncall --config $CONFIG alerts"
$ONCALL --config "$CONFIG" alerts
echo
echo "\$ oncall --config $CONFIG check $ALERT"
$ONCALL --config "$CONFIG" check "$ALERT"
exit 0
