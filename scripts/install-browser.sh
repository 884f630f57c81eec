#!/usr/bin/env bash
# Chromium and its driver from the system's packages, for the dashboard's browser tests (Selenium
# drives the system's browser with the driver built for it: no download at test time, no version
# mismatch). Installed as root where apt-get is; elsewhere, install both yourself.
set -euo pipefail
if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "no chromium and chromedriver found: the dashboard's browser tests need them (Debian: chromium chromium-driver)" >&2
  exit 0
fi
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
echo "installed $(dpkg-query -W -f "\${Package} \${Version}" chromium)"
