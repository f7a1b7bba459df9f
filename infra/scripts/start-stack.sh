#!/usr/bin/env bash
# Starts the mock provider, billing worker, console-api and relay in the background (PIDs in .run/,
# logs in .run/*.log), waits until each answers, then prints the URLs and a command to try. A start
# that fails (a port already taken, a service that does not come up or exits) says why, stops what it
# started and exits 1 (infra/scripts/launch-lib.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .run
# KEY_SECRET and the demo passwords: as given, else from .data/ (generated there the first time).
. infra/scripts/local-secrets.sh

# start, wait_http, check_running, setting
source infra/scripts/launch-lib.sh

# RELAY_URL, CONSOLE_URL, MOCK_URL, MOCK_OPENAI_URL, EPAY_PORT, SERVICE_PORTS, SERVICES
source infra/scripts/stack-ports.sh
# Checked again (check-stack-ports.sh ran before the migration and the seed): a port taken since.
for name in "${SERVICES[@]}"; do PORTS=${SERVICE_PORTS[$name]} check_ports "$name"; done

# The mock provider requires the credential the seeded channel sends.
export MOCK_API_KEY=${MOCK_UPSTREAM_KEY:-sk-ant-mock-local}
PORTS=${SERVICE_PORTS[mock-upstream]} start mock-upstream dist/bench/mock-upstream/main.js
# The OpenAI-format mock (channel type 1); it reads MOCK_OPENAI_PORT and MOCK_OPENAI_KEY itself.
PORTS=${SERVICE_PORTS[mock-openai]} start mock-openai dist/bench/mock-upstream-openai/main.js
# The relay's and the billing worker's Node flags (RELAY_NODE_FLAGS, BILLING_NODE_FLAGS; infra/launch/node-flags.ts).
RELAY_FLAGS=$(node dist/infra/launch/node-flags-main.js relay)
BILLING_FLAGS=$(node dist/infra/launch/node-flags-main.js billing)
PORTS=${SERVICE_PORTS[billing]} NODE_FLAGS=$BILLING_FLAGS start billing dist/billing/main.js
# A generated root password goes to a file of .data/ readable by its owner only, not to the log.
mkdir -p .data
PORTS=${SERVICE_PORTS[console-api]} ROOT_PASSWORD_FILE=${ROOT_PASSWORD_FILE:-.data/root-password} \
  start console-api dist/console-api/main.js
PORTS=${SERVICE_PORTS[payment-sandbox]} CONSOLE_URL=$CONSOLE_URL start payment-sandbox dist/bench/payment-sandbox/main.js
PORTS=${SERVICE_PORTS[relay]} NODE_FLAGS=$RELAY_FLAGS start relay dist/relay/main.js
wait_http mock-upstream "$MOCK_URL/v1/models"
wait_http mock-openai "$MOCK_OPENAI_URL/v1/models"
wait_http console-api "$CONSOLE_URL/api/status"
wait_http relay "$RELAY_URL/health"
wait_http payment-sandbox "http://127.0.0.1:$EPAY_PORT/api/orders"
# Each still runs (the billing worker answers no HTTP: alive is its process under its supervisor), and
# none this start started has exited since (a service crash-looping behind a port that answered).
check_running "${SERVICES[@]}"

RELAY_URL=$RELAY_URL CONSOLE_URL=$CONSOLE_URL MOCK_URL=$MOCK_URL MOCK_OPENAI_URL=$MOCK_OPENAI_URL bash infra/scripts/how-to-call.sh
