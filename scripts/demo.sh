#!/usr/bin/env bash
# Set up, then run the demos on the embedded default cluster: the actorrt tour, then a wordcount
# from a Spark DataFrame through actors and back, with a node killed mid-run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/python examples/quickstart.py "$@"
exec .venv/bin/python examples/bridge_wordcount.py
