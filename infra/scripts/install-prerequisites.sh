#!/usr/bin/env bash
# What a fresh Debian machine lacks for this project: Node.js 20 with npm, curl, a C toolchain for
# native addons, procps, iproute2, openssl, and Chromium for the web console's browser tests (driven by playwright-core). Runs as
# root; does nothing when everything is present.
set -euo pipefail
missing=()
command -v curl >/dev/null || missing+=(curl)
command -v make >/dev/null || missing+=(make)
command -v g++ >/dev/null || missing+=(g++)
command -v python3 >/dev/null || missing+=(python3)
# pgrep and pkill: the stack scripts find a supervised service's process (infra/launch/supervise.ts).
command -v pgrep >/dev/null || missing+=(procps)
command -v chromium >/dev/null || missing+=(chromium)
# ss -K: a test aborts its own Postgres connections with it (infra/postgres/connection-resets.integration.test.ts).
command -v ss >/dev/null || missing+=(iproute2)
# A self-signed certificate for a test's TLS provider (relay/routing/tls-handshake-retry.integration.test.ts).
command -v openssl >/dev/null || missing+=(openssl)
if ! command -v node >/dev/null || ! node -e 'process.exit(+process.versions.node.split(".")[0] >= 20 ? 0 : 1)'; then
  missing+=(nodejs npm)
fi
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then echo "missing: ${missing[*]} (run as root to install them)" >&2; exit 1; fi
echo "installing from Debian's packages: ${missing[*]}"
DEBIAN_FRONTEND=noninteractive apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
if ! node -e 'process.exit(+process.versions.node.split(".")[0] >= 20 ? 0 : 1)'; then
  echo "Node.js $(node -v) is installed, but this project needs Node.js 20 (uWebSockets.js binding, engines)." >&2
  echo "Install Node.js 20 (for example from NodeSource's Debian repository) and run this again." >&2
  exit 1
fi
