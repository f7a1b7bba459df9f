#!/usr/bin/env bash
# Makes Postgres, Redis and ClickHouse answer at their configured URLs. A service that already answers
# is used as it is; one that does not is installed from Debian's packages when missing and started
# with its data under .data/, its PID under .run/ (so that `make down` stops exactly what we started).
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .data .run

DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/gateway}
REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379/0}
CLICKHOUSE_URL=${CLICKHOUSE_URL:-http://127.0.0.1:8123}

# SKIP_SERVICES (space-separated: postgres redis clickhouse) leaves those alone; STARTED_FILE, when set,
# receives the name of each service this run started, so the caller can stop exactly those.
SKIP_SERVICES=${SKIP_SERVICES:-}
STARTED_FILE=${STARTED_FILE:-}
skip() { [[ " $SKIP_SERVICES " == *" $1 "* ]]; }
started() { [ -z "$STARTED_FILE" ] || echo "$1" >> "$STARTED_FILE"; }

hostport() { node -e 'const u=new URL(process.argv[1]); console.log(u.hostname+" "+(u.port||process.argv[2]))' "$1" "$2"; }
need_pkg() { # command package
  command -v "$1" >/dev/null 2>&1 && return 0
  [ "$(id -u)" = 0 ] || { echo "missing $1: install the Debian package $2" >&2; exit 1; }
  echo "installing $2 from Debian's packages"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null
}
tcp_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

# --- Postgres ---------------------------------------------------------------------------------------
read -r PGHOST PGPORT < <(hostport "$DATABASE_URL" 5432)
if skip postgres; then
  :
elif tcp_open "$PGHOST" "$PGPORT"; then
  echo "postgres: using $PGHOST:$PGPORT"
else
  need_pkg psql postgresql
  PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
  PGDATA=$PWD/.data/postgres
  # Postgres refuses to run as root: the cluster belongs to the postgres system user.
  RUNAS=(); [ "$(id -u)" = 0 ] && RUNAS=(runuser -u postgres --)
  if [ ! -f "$PGDATA/PG_VERSION" ]; then
    mkdir -p "$PGDATA"; [ "$(id -u)" = 0 ] && chown postgres "$PGDATA"
    "${RUNAS[@]}" "$PGBIN/initdb" -D "$PGDATA" -U postgres --auth=trust >/dev/null
  fi
  "${RUNAS[@]}" "$PGBIN/pg_ctl" -D "$PGDATA" -o "-p $PGPORT -k /tmp -c listen_addresses=$PGHOST" -l "$PWD/.run/postgres.log" -w start >/dev/null
  head -1 "$PGDATA/postmaster.pid" > .run/postgres.pid
  started postgres
  echo "postgres: started locally on $PGHOST:$PGPORT (data in .data/postgres)"
fi

# --- Redis ------------------------------------------------------------------------------------------
read -r RHOST RPORT < <(hostport "$REDIS_URL" 6379)
if skip redis; then
  :
elif tcp_open "$RHOST" "$RPORT"; then
  echo "redis: using $RHOST:$RPORT"
else
  need_pkg redis-server redis-server
  mkdir -p .data/redis
  # AOF, fsync once a second: Redis holds answered requests not yet billed (the usage stream) and the
  # balance mirror, so a restart without them serves requests free. The cost: one fsync a second and
  # the log on disk (rewritten in the background as it grows); a machine crash loses at most ~1 s of
  # writes, a Redis crash or kill none. `--appendfsync always` loses nothing even then, at an fsync
  # per write (docs/billing.md, "What a failure loses").
  redis-server --daemonize yes --bind "$RHOST" --port "$RPORT" --dir "$PWD/.data/redis" \
    --pidfile "$PWD/.run/redis.pid" --logfile "$PWD/.run/redis.log" --save "" \
    --appendonly yes --appendfsync everysec
  for _ in $(seq 50); do tcp_open "$RHOST" "$RPORT" && break; sleep 0.1; done
  started redis
  echo "redis: started locally on $RHOST:$RPORT"
fi

# --- ClickHouse -------------------------------------------------------------------------------------
if skip clickhouse; then
  :
elif curl -fsS --max-time 1 "$CLICKHOUSE_URL/ping" >/dev/null 2>&1; then
  echo "clickhouse: using $CLICKHOUSE_URL"
else
  # The embedded engine (chdb) behind ClickHouse's HTTP interface: infra/clickhouse/local-server.ts,
  # under the supervisor as the services are (a killed one stayed down, every log read answering 503).
  nohup node dist/infra/launch/supervise-main.js clickhouse -- dist/infra/clickhouse/local-server-main.js >> .run/clickhouse.log 2>&1 &
  echo $! > .run/clickhouse.pid
  for _ in $(seq 100); do curl -fsS --max-time 1 "$CLICKHOUSE_URL/ping" >/dev/null 2>&1 && break; sleep 0.2; done
  curl -fsS --max-time 1 "$CLICKHOUSE_URL/ping" >/dev/null || { echo "clickhouse: local server did not start, see .run/clickhouse.log" >&2; exit 1; }
  started clickhouse
  echo "clickhouse: started embedded server at $CLICKHOUSE_URL (data in ${CLICKHOUSE_LOCAL_PATH:-.data/clickhouse})"
fi
