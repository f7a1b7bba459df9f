#!/usr/bin/env bash
# Starts the mock provider, billing worker, console-api and relay in the background (PIDs in .run/,
# logs in .run/*.log), waits until each answers, then prints the URLs and a command to try.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .run

start() { # name script
  local name=$1 script=$2
  if [ -f ".run/$name.pid" ] && kill -0 "$(cat ".run/$name.pid")" 2>/dev/null; then
    echo "$name: already running (pid $(cat ".run/$name.pid"))"; return
  fi
  nohup node "$script" >> ".run/$name.log" 2>&1 &
  echo $! > ".run/$name.pid"
}
wait_http() { # name url
  for _ in $(seq 100); do curl -s -o /dev/null --max-time 1 "$2" && return 0; sleep 0.1; done
  echo "$1 did not come up; last lines of .run/$1.log:" >&2; tail -20 ".run/$1.log" >&2; exit 1
}

RELAY_URL="http://${RELAY_HOST:-127.0.0.1}:${RELAY_PORT:-3000}"
CONSOLE_URL="http://${CONSOLE_HOST:-127.0.0.1}:${CONSOLE_PORT:-3001}"
MOCK_URL="http://127.0.0.1:${MOCK_UPSTREAM_PORT:-3090}"

# The mock provider requires the credential the seeded channel sends.
export MOCK_API_KEY=${MOCK_UPSTREAM_KEY:-sk-ant-mock-local}
start mock-upstream dist/bench/mock-upstream/main.js
start billing dist/billing/main.js
start console-api dist/console-api/main.js
CONSOLE_URL=$CONSOLE_URL start payment-sandbox dist/bench/payment-sandbox/main.js
start relay dist/relay/main.js
wait_http mock-upstream "$MOCK_URL/v1/models"
wait_http console-api "$CONSOLE_URL/api/status"
wait_http relay "$RELAY_URL/health"
wait_http payment-sandbox http://127.0.0.1:3091/api/orders
sleep 0.3
for name in billing; do kill -0 "$(cat .run/$name.pid)" 2>/dev/null || { echo "$name exited:" >&2; tail -20 ".run/$name.log" >&2; exit 1; }; done

DEMO_KEY=$(node dist/console-api/seed/print-demo-key.js)
# console-api prints a generated root password once, to its stdout; show it here and keep it out of the log file.
ROOT_LINE=$(grep -h 'Generated password' .run/console-api.log | tail -1 || true)
[ -n "$ROOT_LINE" ] && sed -i '/Generated password/d' .run/console-api.log
cat <<MSG

The gateway is up.
  relay         $RELAY_URL        (POST /v1/messages)
  console-api   $CONSOLE_URL        (GET /api/...; endpoints in console-api/README.md)
  mock provider $MOCK_URL
  payments      http://127.0.0.1:3091 (epay sandbox), http://127.0.0.1:3092 (card sandbox)
  logs          .run/*.log        stop everything with: make down
  demo logins   demo / ${DEMO_PASSWORD:-?}, admin / ${ADMIN_PASSWORD:-?}
                (local demo data seeded by make run; passwords generated into .data/)${ROOT_LINE:+
  root          $ROOT_LINE}

Call the relay with the demo key:

  curl -sN $RELAY_URL/v1/messages \\
    -H 'x-api-key: $DEMO_KEY' -H 'anthropic-version: 2023-06-01' -H 'content-type: application/json' \\
    -d '{"model":"claude-sonnet-4-5","max_tokens":32,"stream":true,"messages":[{"role":"user","content":"Hello"}]}'

MSG
