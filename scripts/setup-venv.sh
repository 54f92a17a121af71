#!/usr/bin/env bash
# Creates .venv and installs oncall with its dev and drill extras: `make demo` and the tests run
# the drill, which a plain `pip install oncall` leaves out. On Debian, python3 may come without
# the venv module (package python3-venv); as root we install it, otherwise we say so.
set -euo pipefail
PYTHON=${PYTHON:-python3}

if ! "$PYTHON" -c 'import ensurepip, venv' >/dev/null 2>&1; then
    pkg="python3-venv"
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "setup: installing $pkg with apt-get" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq && apt-get install -y -qq --no-install-recommends "$pkg" >/dev/null
    else
        echo "setup: $PYTHON has no venv module: sudo apt-get install $pkg" >&2
        exit 1
    fi
fi

[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[dev,drill]'
