#!/usr/bin/env bash
# `make cluster-up`: the gateway scaled out on this machine. A Redis Cluster of 3 masters and 3
# replicas (ports 7000-7005, AOF, data in .data/redis-cluster/), 2 relays (3000 and 3002), 2 billing
# workers sharing the shard streams, the console-api (3001), the mock provider and payment sandboxes,
# on the same Postgres and ClickHouse as `make run` (already migrated and seeded by make). PIDs in
# .run/, logs in .run/*.log; `make cluster-down` stops it all. Prints what `make run` prints.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .run
# KEY_SECRET and the demo passwords: as given, else from .data/ (generated there the first time).
. infra/scripts/local-secrets.sh

CLUSTER_BASE_PORT=${CLUSTER_BASE_PORT:-7000}
export REDIS_CLUSTER_NODES=${REDIS_CLUSTER_NODES:-$(bash infra/scripts/redis-cluster.sh nodes "$CLUSTER_BASE_PORT")}
export REDIS_SHARDS=${REDIS_SHARDS:-64}

for name in relay console-api billing; do
  if [ -f ".run/$name.pid" ] && kill -0 "$(cat ".run/$name.pid")" 2>/dev/null; then
    echo "$name of make run is running (pid $(cat ".run/$name.pid")): make down first" >&2; exit 1
  fi
done
bash infra/scripts/redis-cluster.sh start "$CLUSTER_BASE_PORT" .data/redis-cluster

# start, wait_http, check_running, setting; a failed start stops what it started (launch-lib.sh)
source infra/scripts/launch-lib.sh
STOP_COMMAND="make cluster-down"

HOST=${RELAY_HOST:-127.0.0.1}
RELAY_URL="http://$HOST:3000"
RELAY2_URL="http://$HOST:3002"
CONSOLE_URL="http://${CONSOLE_HOST:-127.0.0.1}:${CONSOLE_PORT:-3001}"
MOCK_URL="http://127.0.0.1:${MOCK_UPSTREAM_PORT:-3090}"

export MOCK_API_KEY=${MOCK_UPSTREAM_KEY:-sk-ant-mock-local}
PORTS="MOCK_UPSTREAM_PORT=$(setting MOCK_UPSTREAM_HOST 127.0.0.1):$(setting MOCK_UPSTREAM_PORT 3090)" \
  start mock-upstream dist/bench/mock-upstream/main.js
PORTS="MOCK_OPENAI_PORT=$(setting MOCK_OPENAI_HOST 127.0.0.1):$(setting MOCK_OPENAI_PORT 3093)" \
  start mock-openai dist/bench/mock-upstream-openai/main.js
# The relay's and the billing worker's Node flags (RELAY_NODE_FLAGS, BILLING_NODE_FLAGS; infra/launch/node-flags.ts).
RELAY_FLAGS=$(node dist/infra/launch/node-flags-main.js relay)
BILLING_FLAGS=$(node dist/infra/launch/node-flags-main.js billing)
BILLING_METRICS_HOST=$(setting BILLING_METRICS_HOST 127.0.0.1)
PORTS="=$BILLING_METRICS_HOST:9464" \
  NODE_FLAGS=$BILLING_FLAGS start billing dist/billing/main.js BILLING_CONSUMER=billing-1 BILLING_METRICS_PORT=9464
PORTS="=$BILLING_METRICS_HOST:9466" \
  NODE_FLAGS=$BILLING_FLAGS start billing-2 dist/billing/main.js BILLING_CONSUMER=billing-2 BILLING_METRICS_PORT=9466
mkdir -p .data
PORTS="CONSOLE_PORT=$(setting CONSOLE_HOST 127.0.0.1):$(setting CONSOLE_PORT 3001)" \
  ROOT_PASSWORD_FILE=${ROOT_PASSWORD_FILE:-.data/root-password} start console-api dist/console-api/main.js
PORTS="EPAY_SANDBOX_PORT=127.0.0.1:$(setting EPAY_SANDBOX_PORT 3091) CARDPAY_SANDBOX_PORT=127.0.0.1:$(setting CARDPAY_SANDBOX_PORT 3092)" \
  CONSOLE_URL=$CONSOLE_URL start payment-sandbox dist/bench/payment-sandbox/main.js
# The relays' and billing workers' ports are fixed here ("=host:port"); a relay's own is not checked when
# it is meant to be shared (RELAY_REUSE_PORT, SO_REUSEPORT).
RELAY_METRICS_HOST=$(setting RELAY_METRICS_HOST 127.0.0.1)
relay_ports() { # port metrics-port
  case "$(setting RELAY_REUSE_PORT false)" in true|1|yes) ;; *) echo -n "=$HOST:$1 " ;; esac
  echo "=$RELAY_METRICS_HOST:$2"
}
PORTS=$(relay_ports 3000 9465) NODE_FLAGS=$RELAY_FLAGS start relay dist/relay/main.js RELAY_PORT=3000 RELAY_METRICS_PORT=9465
PORTS=$(relay_ports 3002 9467) NODE_FLAGS=$RELAY_FLAGS start relay-2 dist/relay/main.js RELAY_PORT=3002 RELAY_METRICS_PORT=9467
wait_http mock-upstream "$MOCK_URL/v1/models"
wait_http mock-openai "http://127.0.0.1:${MOCK_OPENAI_PORT:-3093}/v1/models"
wait_http console-api "$CONSOLE_URL/api/status"
wait_http relay "$RELAY_URL/health"
wait_http relay-2 "$RELAY2_URL/health"
wait_http payment-sandbox "http://127.0.0.1:${EPAY_SANDBOX_PORT:-3091}/api/orders"
# Each still runs (the billing workers answer no HTTP: alive is each one's process under its
# supervisor), and none this start started has exited since.
check_running mock-upstream mock-openai billing billing-2 console-api payment-sandbox relay relay-2

EXTRA_LINES="  relay 2       $RELAY2_URL        (the same gateway: any relay serves any key)
  redis cluster $REDIS_CLUSTER_NODES ($REDIS_SHARDS shards; billing workers: 2, metrics on 9464 and 9466)" \
STOP_COMMAND=$STOP_COMMAND \
MOCK_OPENAI_URL="http://127.0.0.1:${MOCK_OPENAI_PORT:-3093}" RELAY_URL=$RELAY_URL CONSOLE_URL=$CONSOLE_URL MOCK_URL=$MOCK_URL bash infra/scripts/how-to-call.sh
