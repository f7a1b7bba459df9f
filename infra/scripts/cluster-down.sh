#!/usr/bin/env bash
# `make cluster-down`: stops, by PID, what `make cluster-up` started (relays and billing workers
# first, so their last settlements and batches reach Redis and Postgres), then the Redis Cluster, then
# what `make cluster-up` started because nothing answered at its URL (the embedded ClickHouse; Postgres
# or Redis where they were started), as `make down` does.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash infra/scripts/stop-all.sh relay relay-2 console-api payment-sandbox billing billing-2 mock-upstream mock-openai
bash infra/scripts/redis-cluster.sh stop "${CLUSTER_BASE_PORT:-7000}" .data/redis-cluster
bash infra/scripts/stop-all.sh clickhouse redis postgres
