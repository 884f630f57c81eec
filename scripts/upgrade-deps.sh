#!/usr/bin/env bash
# Re-resolve requirements.lock to the newest versions pyproject.toml allows, install them, and run
# the whole suite: drift in what the package index serves shows up here as a failing run, not on a
# newcomer's fresh machine. Commit the new lock once the suite passes.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/lock-deps.sh --upgrade
git --no-pager diff --stat -- requirements.lock || true
bash scripts/test.sh "$@"
