#!/usr/bin/env bash
# Create .venv (if missing) and install exactly what requirements.lock pins (hashes checked), then
# actorrt itself, editable, and a redis-server with TLS where none is (scripts/install-redis.sh).
# Idempotent. scripts/upgrade-deps.sh moves the lock to newer versions.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet --require-hashes -r requirements.lock
.venv/bin/python -m pip install --quiet --no-deps --no-build-isolation -e .
bash scripts/install-redis.sh
echo "actorrt installed in $(pwd)/.venv"
