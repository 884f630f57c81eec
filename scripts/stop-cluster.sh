#!/usr/bin/env bash
# Stop an actorrt cluster: its head, the head's nodes and store shards. Works from any cwd.
# Nodes added with `actorrt start --address` (on any machine) exit by themselves within ~5 s.
# Succeeds, saying so, when no cluster is running.
#
# Environment:
#   HEAD_ADDRESS        the head's HOST:PORT (default: the one in this machine's session file)
#   ACTORRT_TOKEN       the cluster token (default: the session file's)
#   ACTORRT_SESSION_DIR session directory [~/.actorrt]
#   ACTORRT_TLS_CERT, ACTORRT_TLS_KEY, ACTORRT_TLS_CA
#                       the TLS files, for a cluster that runs in mutual TLS
#   PYTHON              run the CLI as "$PYTHON -m actorrt" (default: the .venv setup.sh made, else `actorrt` from PATH)
# Extra arguments are passed to `actorrt stop`.
set -euo pipefail

HEAD_ADDRESS="${HEAD_ADDRESS:-}"

source "$(dirname "${BASH_SOURCE[0]}")/_cli.sh"

args=()
if [[ -n "$HEAD_ADDRESS" ]]; then
  args=(--address "$HEAD_ADDRESS")
  echo "stop-cluster: stopping the head at $HEAD_ADDRESS"
else
  echo "stop-cluster: stopping the head named by this machine's session file"
fi
"${cli[@]}" stop "${args[@]}" "$@"
