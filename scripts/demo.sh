#!/usr/bin/env bash
# Set up, then run the quickstart demo on the embedded default cluster.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python examples/quickstart.py "$@"
