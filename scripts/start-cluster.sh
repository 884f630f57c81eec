#!/usr/bin/env bash
# Start an actorrt cluster, or add nodes on this machine to a running one. Works from any cwd.
#
#   scripts/start-cluster.sh                      # a head here with $NODES nodes and $SHARDS shards
#   HEAD_ADDRESS=h:p scripts/start-cluster.sh     # add $NODES nodes here to the head at h:p
#
# Environment (defaults in brackets):
#   NODES [2]           node processes (the head's managed nodes, or nodes to add)
#   SHARDS [2]          redis-server shards of the lineage store (head only)
#   PORT [0]            head port, 0 for any free one (head only)
#   HOST [127.0.0.1]    address to bind; to span machines, an address the other machines can reach
#   HEAD_ADDRESS        a running head's HOST:PORT: add nodes to it instead of starting a head
#   ACTORRT_TOKEN       the cluster token (for HEAD_ADDRESS on another machine: it is in the
#                       head's session file)
#   ACTORRT_SESSION_DIR session directory [~/.actorrt]
#   ACTORRT_TLS_CERT, ACTORRT_TLS_KEY, ACTORRT_TLS_CA
#                       mutual TLS between all processes: all three or none (README, Security)
#   PYTHON              run the CLI as "$PYTHON -m actorrt" (default: the .venv setup.sh made, else `actorrt` from PATH)
# Extra arguments are passed to `actorrt start`.
set -euo pipefail

NODES="${NODES:-2}"
SHARDS="${SHARDS:-2}"
PORT="${PORT:-0}"
HOST="${HOST:-127.0.0.1}"
HEAD_ADDRESS="${HEAD_ADDRESS:-}"

source "$(dirname "${BASH_SOURCE[0]}")/_cli.sh"

if [[ -z "$HEAD_ADDRESS" ]]; then
  echo "start-cluster: starting a head on $HOST (port $PORT) with $NODES nodes and $SHARDS store shards"
  "${cli[@]}" start --head --host "$HOST" --port "$PORT" --nodes "$NODES" --store-shards "$SHARDS" "$@"
else
  echo "start-cluster: adding $NODES node(s) on $HOST to the head at $HEAD_ADDRESS"
  for ((i = 0; i < NODES; i++)); do
    "${cli[@]}" start --address "$HEAD_ADDRESS" --host "$HOST" "$@"
  done
fi
echo "start-cluster: done; \`${cli[*]} status\` shows the cluster, $repo/scripts/stop-cluster.sh stops it"
