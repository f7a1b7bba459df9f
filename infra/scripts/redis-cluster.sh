#!/usr/bin/env bash
# A Redis Cluster of 3 masters and 3 replicas on this machine, from Debian's redis-server: cluster
# mode, AOF (appendfsync everysec), one directory per node under DIR. Used by `make cluster-up`
# (ports 7000-7005) and by the cluster integration tests (ports 7100-7105).
#
#   redis-cluster.sh start BASE_PORT DIR    start the 6 nodes (those not running), form the cluster
#                                           once, wait until every node reports cluster_state:ok
#   redis-cluster.sh stop BASE_PORT DIR     stop, by the PIDs in DIR, the nodes this script started
#                                           there (on any ports)
#   redis-cluster.sh nodes BASE_PORT        print the seed list host:port,... (REDIS_CLUSTER_NODES)
set -euo pipefail
cmd=${1:?start|stop|nodes}
base=${2:?base port}
dir=${3:-.data/redis-cluster-$base}
case "$dir" in /*) ;; *) dir="$PWD/$dir" ;; esac
ports=()
for i in 0 1 2 3 4 5; do ports+=($((base + i))); done

nodes() { local IFS=,; local l=(); for p in "${ports[@]}"; do l+=("127.0.0.1:$p"); done; echo "${l[*]}"; }

cluster_ok() { redis-cli -p "$1" cluster info 2>/dev/null | grep -q '^cluster_state:ok'; }

start() {
  command -v redis-server >/dev/null || { echo "redis-server is missing (apt-get install redis-server)" >&2; exit 1; }
  mkdir -p "$dir"
  for p in "${ports[@]}"; do
    mkdir -p "$dir/$p"
    if redis-cli -p "$p" ping >/dev/null 2>&1; then
      [ -f "$dir/$p/redis.pid" ] || { echo "port $p answers but is not a node of $dir: pick other ports" >&2; exit 1; }
      continue
    fi
    # cluster-node-timeout 2000: a killed master is replaced by its replica within a few seconds.
    redis-server --port "$p" --bind 127.0.0.1 --daemonize yes --dir "$dir/$p" \
      --pidfile "$dir/$p/redis.pid" --logfile "$dir/$p/redis.log" \
      --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 2000 \
      --appendonly yes --appendfsync everysec --save '' >/dev/null
  done
  for p in "${ports[@]}"; do
    for _ in $(seq 100); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.05; done
    redis-cli -p "$p" ping >/dev/null 2>&1 || { echo "redis node $p did not start: $dir/$p/redis.log" >&2; exit 1; }
  done
  if ! cluster_ok "${ports[0]}"; then
    if [ "$(redis-cli -p "${ports[0]}" cluster info | grep '^cluster_known_nodes:' | tr -dc 0-9)" = 1 ]; then
      local addrs=(); for p in "${ports[@]}"; do addrs+=("127.0.0.1:$p"); done
      redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes >"$dir/create.log" 2>&1 \
        || { cat "$dir/create.log" >&2; exit 1; }
    fi
  fi
  for p in "${ports[@]}"; do
    for _ in $(seq 200); do cluster_ok "$p" && break; sleep 0.1; done
    cluster_ok "$p" || { echo "redis node $p: cluster not ok after 20 s" >&2; redis-cli -p "$p" cluster info >&2; exit 1; }
  done
  echo "redis cluster up: $(nodes)"
}

# Every node with a PID file under DIR, whatever its port: a cluster started on other ports
# (CLUSTER_BASE_PORT) in the same DIR is stopped too, before `make clean` deletes DIR.
stop() {
  local stopped=()
  for f in "$dir"/*/redis.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid"
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    fi
    rm -f "$f"
    stopped+=("$(basename "$(dirname "$f")")")
  done
  [ ${#stopped[@]} -eq 0 ] || echo "redis cluster stopped (nodes ${stopped[*]})"
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  nodes) nodes ;;
  *) echo "unknown command $cmd" >&2; exit 2 ;;
esac
