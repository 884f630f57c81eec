#!/usr/bin/env bash
# Set up, then run the whole test suite (real node processes, redis-server shards, SIGKILLs, and a
# headless Chromium on the dashboard).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/install-browser.sh
export PATH="$(pwd)/.venv/bin:$PATH"
exec pytest -q --durations=20 "$@"
