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

RELAY_HOST=$(setting RELAY_HOST 127.0.0.1); RELAY_PORT=$(setting RELAY_PORT 3000)
CONSOLE_HOST=$(setting CONSOLE_HOST 127.0.0.1); CONSOLE_PORT=$(setting CONSOLE_PORT 3001)
RELAY_URL="http://$RELAY_HOST:$RELAY_PORT"
CONSOLE_URL="http://$CONSOLE_HOST:$CONSOLE_PORT"
MOCK_URL="http://127.0.0.1:$(setting MOCK_UPSTREAM_PORT 3090)"
MOCK_OPENAI_URL="http://127.0.0.1:$(setting MOCK_OPENAI_PORT 3093)"
EPAY_PORT=$(setting EPAY_SANDBOX_PORT 3091)
# The ports each service listens on ("VARIABLE=host:port ..."), all checked before anything starts:
# one another process holds stops the start there, naming it. The relay's own port is not checked
# when it is meant to be shared (RELAY_REUSE_PORT, SO_REUSEPORT).
RELAY_PORT_SPEC="RELAY_PORT=$RELAY_HOST:$RELAY_PORT"
case "$(setting RELAY_REUSE_PORT false)" in true|1|yes) RELAY_PORT_SPEC="" ;; esac
declare -A SERVICE_PORTS=(
  [mock-upstream]="MOCK_UPSTREAM_PORT=$(setting MOCK_UPSTREAM_HOST 127.0.0.1):$(setting MOCK_UPSTREAM_PORT 3090)"
  [mock-openai]="MOCK_OPENAI_PORT=$(setting MOCK_OPENAI_HOST 127.0.0.1):$(setting MOCK_OPENAI_PORT 3093)"
  [billing]="BILLING_METRICS_PORT=$(setting BILLING_METRICS_HOST 127.0.0.1):$(setting BILLING_METRICS_PORT 9464)"
  [console-api]="CONSOLE_PORT=$CONSOLE_HOST:$CONSOLE_PORT"
  [payment-sandbox]="EPAY_SANDBOX_PORT=127.0.0.1:$EPAY_PORT CARDPAY_SANDBOX_PORT=127.0.0.1:$(setting CARDPAY_SANDBOX_PORT 3092)"
  [relay]="$RELAY_PORT_SPEC RELAY_METRICS_PORT=$(setting RELAY_METRICS_HOST 127.0.0.1):$(setting RELAY_METRICS_PORT 9465)"
)
SERVICES=(mock-upstream mock-openai billing console-api payment-sandbox relay)
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
