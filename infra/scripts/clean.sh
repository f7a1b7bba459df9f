#!/usr/bin/env bash
# `make clean`: stops everything `make run` or `make cluster-up` started (cluster-down.sh: the relays
# drained, both billing workers, the Redis Cluster, then what ensure-services.sh started), then deletes
# dist/, .run/ and .data/, except:
#   - the local secrets (key-secret, demo-password, admin-password, root-password). The database
#     usually lives outside .data/ (the machine's own Postgres at DATABASE_URL), and `make clean` does
#     not delete it: its API keys, channel credentials and secret options open only under that
#     KEY_SECRET (a new one makes the relay answer 401 to every key), and its demo and root accounts
#     keep the passwords in those files. Delete them by hand together with the database.
#   - .data/relay-spool when it holds a relay's spool file: settlements Redis has not taken yet (a relay
#     that stopped cleanly leaves none); the next relay started here replays them. Deleted, those
#     requests stay unbilled.
#   - with such a spool, the data of the Redis `make run` or `make cluster-up` started (.data/redis,
#     .data/redis-cluster): a spooled settlement settles against its request's reservation, kept
#     there, and the usage stream there may hold requests the billing worker has not billed yet.
#     Deleted, the replay finds no reservation and settles nothing: the request is served free.
# Deletes nothing while a process of .run/, a Redis Cluster node of .data/redis-cluster/ or the
# Postgres of .data/postgres still runs (one that would not stop): its files would go from under it.
set -euo pipefail
cd "$(dirname "$0")/../.."

bash infra/scripts/cluster-down.sh

running=()
for f in .run/*.pid .data/redis-cluster/*/redis.pid; do
  [ -f "$f" ] || continue
  pid=$(head -1 "$f" 2>/dev/null || true)
  [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && running+=("$f: pid $pid")
done
if [ -f .data/postgres/postmaster.pid ]; then
  pid=$(head -1 .data/postgres/postmaster.pid 2>/dev/null || true)
  [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && running+=(".data/postgres: pid $pid")
fi
if [ ${#running[@]} -gt 0 ]; then
  echo "make clean: still running, so nothing was deleted:" >&2
  printf '  %s\n' "${running[@]}" >&2
  exit 1
fi

rm -rf dist .run
[ -d .data ] || exit 0

keep=(key-secret demo-password admin-password root-password)
kept=()
for name in "${keep[@]}"; do [ -e ".data/$name" ] && kept+=(".data/$name"); done
spool_files=0
if [ -d .data/relay-spool ]; then
  # Files holding something, of the stacks' relays: an empty file is nothing to replay, and a test
  # stack's (test-* prefixes, from before the tests spooled under the system's temporary directory)
  # is no make-run relay's to replay.
  spool_files=$(find .data/relay-spool -type f \( -name '*.spool' -o -name '*.claimed' \) -size +0 ! -path '.data/relay-spool/test-*' | wc -l)
  [ "$spool_files" -eq 0 ] || keep+=(relay-spool)
fi
kept_redis=()
if [ "$spool_files" -gt 0 ]; then
  for name in redis redis-cluster; do
    [ -d ".data/$name" ] && { keep+=("$name"); kept_redis+=(".data/$name"); }
  done
fi
find_args=()
for name in "${keep[@]}"; do find_args+=(! -name "$name"); done
find .data -mindepth 1 -maxdepth 1 "${find_args[@]}" -exec rm -rf {} +
echo "deleted dist/, .run/ and .data/"
if [ ${#kept[@]} -gt 0 ]; then
  echo "kept ${kept[*]}: the API keys, channel credentials and accounts of the database (DATABASE_URL," \
    "which make clean does not delete) open only with them; delete them by hand along with the database"
fi
if [ "$spool_files" -gt 0 ]; then
  echo "kept .data/relay-spool: $spool_files spool file(s) of settlements Redis has not taken yet; the next" \
    "relay started here replays them (deleted, those requests stay unbilled)" >&2
fi
if [ ${#kept_redis[@]} -gt 0 ]; then
  echo "kept ${kept_redis[*]} as well: the Redis data the spooled settlements settle against (their" \
    "reservations, and usage not billed yet), loaded by the Redis make run (.data/redis) or make cluster-up" \
    "(.data/redis-cluster) starts next. Deleted, the replay finds no reservation and those requests go unbilled" >&2
fi
