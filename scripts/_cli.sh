# Sourced by the cluster scripts: sets the array `cli` to the way to run the actorrt CLI here.
#   PYTHON set        -> "$PYTHON -m actorrt"
#   actorrt on PATH   -> actorrt
#   otherwise         -> python3 -m actorrt from this checkout
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ -n "${PYTHON:-}" ]]; then
  cli=("$PYTHON" -m actorrt)
elif command -v actorrt >/dev/null 2>&1; then
  cli=(actorrt)
else
  export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
  cli=(python3 -m actorrt)
fi
