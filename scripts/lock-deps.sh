#!/usr/bin/env bash
# Resolve requirements.lock from pyproject.toml (the runtime and its dev extras): exact versions with
# their hashes, for Python 3.11 on Linux x86_64. Without --upgrade it keeps what the lock has where
# pyproject.toml still allows it; scripts/upgrade-deps.sh passes --upgrade.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || "${PYTHON:-python3}" -m venv .venv
.venv/bin/python -m pip install --quiet "uv==0.13.9"
.venv/bin/uv pip compile --quiet pyproject.toml --extra dev --generate-hashes --python-version 3.11 \
  --python-platform x86_64-unknown-linux-gnu \
  --custom-compile-command "bash scripts/lock-deps.sh" -o requirements.lock "$@"
