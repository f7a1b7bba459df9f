#!/usr/bin/env bash
# `make test`: every test file against real Postgres, Redis and ClickHouse, leaving nothing running.
# Postgres and Redis are used where they answer, or started for the run and stopped after it. The
# embedded ClickHouse is not started here: the tests' global setup (infra/testing/global-setup.ts)
# starts one when none answers and stops it when the run ends.
set -euo pipefail
cd "$(dirname "$0")/../.."
STARTED_FILE=$(mktemp)
export STARTED_FILE
stop_started() {
  local names
  names=$(tac "$STARTED_FILE" | tr '\n' ' ')
  [ -z "$names" ] || bash infra/scripts/stop-all.sh $names
  rm -f "$STARTED_FILE"
}
trap stop_started EXIT
SKIP_SERVICES=clickhouse bash infra/scripts/ensure-services.sh
npx vitest run "$@"
