#!/usr/bin/env bash
# Installs the system programs the tests and the drill run for real: redis-server, prometheus
# and promtool, prometheus-redis-exporter, prometheus-alertmanager and amtool (Debian packages).
# As root with apt-get, installs what is missing; otherwise stops and names the packages to
# install. Never prompts (CI has no standard input).
set -euo pipefail

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
    missing+=(prometheus)
fi
# The drill's Redis exporter: the real redis_exporter, so alert rules see its real metric names.
command -v prometheus-redis-exporter >/dev/null 2>&1 || missing+=(prometheus-redis-exporter)
# Alertmanager (silences, inhibitions): the real one, for the drill and the tests.
if ! command -v prometheus-alertmanager >/dev/null 2>&1 || ! command -v amtool >/dev/null 2>&1; then
    missing+=(prometheus-alertmanager)
fi
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing ${missing[*]} with apt-get" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    # Debian's packages start system-wide services where an init system runs; the tests and
    # the drill start their own servers on free ports and do not need them.
    exit 0
fi

echo "setup: missing system packages: ${missing[*]}" >&2
echo "setup: install them with: sudo apt-get install ${missing[*]}" >&2
exit 1
