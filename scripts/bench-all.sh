#!/usr/bin/env bash
# Run every benchmark, quick (a few minutes) or full (about an hour): bash scripts/bench-all.sh [--full]
# Each writes its JSON and PNG into bench/results/ and prints its table; bench/README.md says what
# each measures. The peers (Ray for objects.py, torch's gloo for collective.py) run when installed:
#   .venv/bin/pip install ray==2.60.0 torch==2.13.0
# and Bytewax and PyFlink for streaming.py in an environment of their own: bash scripts/setup-peers.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >/dev/null
export PATH="$(pwd)/.venv/bin:$PATH"
if [ "${1:-}" = "--full" ]; then
  python bench/objects.py
  python bench/collective.py
  python bench/allreduce_recovery.py --iterations 100 --checkpoint-every 100 --kill-at 90 --ft lineage_stash,global_rollback,none
  python bench/sgd.py
  python bench/ring.py
  python bench/streaming_wordcount.py
  python bench/streaming.py             # with Bytewax and PyFlink once scripts/setup-peers.sh ran
  python bench/replay_rate.py --repeat 3
  python bench/plain_recovery.py
  python bench/lineage_size.py
  python bench/spark_bridge.py
else
  python bench/objects.py --quick
  python bench/collective.py --quick
  python bench/allreduce_recovery.py --iterations 30 --checkpoint-every 30 --kill-at 25
  python bench/sgd.py --quick
  python bench/ring.py --rounds 100
  python bench/streaming_wordcount.py --quick
  python bench/streaming.py --quick --parts a,c
  python bench/replay_rate.py
  python bench/plain_recovery.py --iterations 30 --kill-at 25
fi
python bench/table2.py
