#!/usr/bin/env bash
# The streaming peers for bench/streaming.py, in an environment of their own (.venv-peers): their
# pins (PyFlink's grpcio and protobuf, through apache-beam) clash with actorrt's.
#   bash scripts/setup-peers.sh && python bench/streaming.py
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
[ -x .venv-peers/bin/python ] || "$PYTHON" -m venv .venv-peers
.venv-peers/bin/python -m pip install --quiet --upgrade pip
.venv-peers/bin/python -m pip install --quiet "bytewax==0.21.1" "apache-flink==2.3.0"
echo "peers installed in $(pwd)/.venv-peers (Java 11+ must be on PATH for PyFlink)"
