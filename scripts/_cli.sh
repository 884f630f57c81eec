# Sourced by the cluster scripts: sets the array `cli` to the way to run the actorrt CLI here.
#   PYTHON set                        -> "$PYTHON -m actorrt"
#   this checkout's .venv (setup.sh)  -> its python -m actorrt (no need to activate it)
#   actorrt on PATH                   -> actorrt
#   otherwise                         -> an error saying to run scripts/setup.sh
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ -n "${PYTHON:-}" ]]; then
  cli=("$PYTHON" -m actorrt)
elif [[ -x "$repo/.venv/bin/python" ]]; then
  cli=("$repo/.venv/bin/python" -m actorrt)
elif command -v actorrt >/dev/null 2>&1; then
  cli=(actorrt)
else
  echo "$(basename "$0"): no Python with actorrt's dependencies here: run \`bash $repo/scripts/setup.sh\`" \
       "(it makes $repo/.venv), or set PYTHON to a python that has them" >&2
  exit 2
fi
