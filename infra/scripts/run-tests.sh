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
# tests/cluster starts Redis Clusters of its own on ports 7100-7105, 7120-7125, 7130-7135 and 7140-7142 (and stops them) when asked to.
export TEST_REDIS_CLUSTER=${TEST_REDIS_CLUSTER:-start}
status=0
# Each pass also writes a JSON report, summarised after the pass (infra/scripts/print-test-failures.mjs)
# so that the end of a long run's output says which tests failed.
report_dir=$(mktemp -d)
npx vitest run --reporter=default --reporter=json --outputFile.json="$report_dir/first-pass.json" "$@" || status=$?
node infra/scripts/print-test-failures.mjs "$report_dir/first-pass.json" "first pass"
# Second pass, on the whole run only (no arguments; TEST_RELAY_CLUSTER=0 leaves it out): the relay's
# integration tests again (its unit tests touch no Redis: the first pass ran them) on two relays over
# a Redis Cluster of its own (ports 7110-7115), each test stack with 16
# shards and a second billing worker (tests/harness/gateway-stack.ts). Tests bound to one Redis or one
# relay process skip themselves there, saying why.
if [ $# -eq 0 ] && [ "${TEST_RELAY_CLUSTER:-1}" != 0 ]; then
  relay_cluster_dir=$(mktemp -d)
  stop_relay_cluster() { bash infra/scripts/redis-cluster.sh stop 7110 "$relay_cluster_dir" || true; rm -rf "$relay_cluster_dir"; }
  trap 'stop_relay_cluster; stop_started' EXIT
  bash infra/scripts/redis-cluster.sh start 7110 "$relay_cluster_dir"
  TEST_REDIS_CLUSTER_NODES=$(bash infra/scripts/redis-cluster.sh nodes 7110) TEST_GATEWAY_RELAYS=2 TEST_REDIS_CLUSTER= \
    npx vitest run --reporter=default --reporter=json --outputFile.json="$report_dir/cluster-pass.json" --exclude '**/*.unit.test.ts' relay || status=$?
  node infra/scripts/print-test-failures.mjs "$report_dir/cluster-pass.json" "cluster pass"
  # Repeated so that the tail of the output holds both passes' verdicts.
  node infra/scripts/print-test-failures.mjs "$report_dir/first-pass.json" "first pass"
fi
rm -rf "$report_dir"
exit $status
