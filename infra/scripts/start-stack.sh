#!/usr/bin/env bash
# Starts the mock provider, billing worker, console-api and relay in the background (PIDs in .run/,
# logs in .run/*.log), waits until each answers, then prints the URLs and a command to try.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .run
# KEY_SECRET and the demo passwords: as given, else from .data/ (generated there the first time).
. infra/scripts/local-secrets.sh

# start and wait_http
source infra/scripts/launch-lib.sh

RELAY_URL="http://${RELAY_HOST:-127.0.0.1}:${RELAY_PORT:-3000}"
CONSOLE_URL="http://${CONSOLE_HOST:-127.0.0.1}:${CONSOLE_PORT:-3001}"
MOCK_URL="http://127.0.0.1:${MOCK_UPSTREAM_PORT:-3090}"
MOCK_OPENAI_URL="http://127.0.0.1:${MOCK_OPENAI_PORT:-3093}"

# The mock provider requires the credential the seeded channel sends.
export MOCK_API_KEY=${MOCK_UPSTREAM_KEY:-sk-ant-mock-local}
start mock-upstream dist/bench/mock-upstream/main.js
# The OpenAI-format mock (channel type 1); it reads MOCK_OPENAI_PORT and MOCK_OPENAI_KEY itself.
start mock-openai dist/bench/mock-upstream-openai/main.js
# The relay's and the billing worker's Node flags (RELAY_NODE_FLAGS, BILLING_NODE_FLAGS; infra/launch/node-flags.ts).
RELAY_FLAGS=$(node dist/infra/launch/node-flags-main.js relay)
BILLING_FLAGS=$(node dist/infra/launch/node-flags-main.js billing)
NODE_FLAGS=$BILLING_FLAGS start billing dist/billing/main.js
# A generated root password goes to a file of .data/ readable by its owner only, not to the log.
mkdir -p .data
ROOT_PASSWORD_FILE=${ROOT_PASSWORD_FILE:-.data/root-password} start console-api dist/console-api/main.js
CONSOLE_URL=$CONSOLE_URL start payment-sandbox dist/bench/payment-sandbox/main.js
NODE_FLAGS=$RELAY_FLAGS start relay dist/relay/main.js
wait_http mock-upstream "$MOCK_URL/v1/models"
wait_http mock-openai "$MOCK_OPENAI_URL/v1/models"
wait_http console-api "$CONSOLE_URL/api/status"
wait_http relay "$RELAY_URL/health"
wait_http payment-sandbox "http://127.0.0.1:${EPAY_SANDBOX_PORT:-3091}/api/orders"
sleep 0.3
# The billing worker answers no HTTP: alive is its process under its supervisor.
for name in billing; do pgrep -P "$(cat .run/$name.pid)" >/dev/null 2>&1 || { echo "$name exited:" >&2; tail -20 ".run/$name.log" >&2; exit 1; }; done

RELAY_URL=$RELAY_URL CONSOLE_URL=$CONSOLE_URL MOCK_URL=$MOCK_URL MOCK_OPENAI_URL=$MOCK_OPENAI_URL bash infra/scripts/how-to-call.sh
