#!/usr/bin/env bash
# Makes Postgres, Redis and ClickHouse answer at their configured URLs. A service that already answers
# is used as it is; one that does not is installed from Debian's packages when missing and started
# with its data under .data/, its PID under .run/ (so that `make down` stops exactly what we started).
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .data .run

# The configuration, checked once before anything starts (infra/launch/check-config-main.ts): a value
# refused is one line per variable and exit 78 (EX_CONFIG), not a service failing on it later (the
# embedded ClickHouse started again and again, then reported as "did not start").
if [ -f dist/infra/launch/check-config-main.js ]; then
  node dist/infra/launch/check-config-main.js config || {
    rc=$?; echo "nothing was started: fix the variable(s) above (README.md, Configuration)" >&2; exit "$rc"
  }
fi

DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/gateway}
REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379/0}
CLICKHOUSE_URL=${CLICKHOUSE_URL:-http://127.0.0.1:8123}

# SKIP_SERVICES (space-separated: postgres redis clickhouse) leaves those alone; STARTED_FILE, when set,
# receives the name of each service this run started, so the caller can stop exactly those.
SKIP_SERVICES=${SKIP_SERVICES:-}
STARTED_FILE=${STARTED_FILE:-}
STARTED_HERE=()
skip() { [[ " $SKIP_SERVICES " == *" $1 "* ]]; }
started() { STARTED_HERE+=("$1"); [ -z "$STARTED_FILE" ] || echo "$1" >> "$STARTED_FILE"; }

# "host port" of the URL in the variable named (a redis+cluster:// URL: its first node), or one line
# naming the variable, without its value (it may hold a credential), and exit 78 (EX_CONFIG).
hostport() { # VARIABLE default-port
  node -e '
    const [name, fallback] = process.argv.slice(1);
    const value = process.env[name] ?? "";
    const expected = { DATABASE_URL: "postgres://user@host:port/database", REDIS_URL: "redis://host:port/db" }[name] ?? "a URL";
    let u;
    try { u = new URL(value.replace(/^redis\+cluster:\/\/([^,/]*).*$/, "redis://$1")); } catch { u = null; }
    if (!u || !u.hostname) {
      process.stderr.write(`ensure-services: ${name}: not a URL with a host (expected ${expected}); value not shown (it may hold a credential)\n`);
      process.exit(78);
    }
    console.log(u.hostname + " " + (u.port || fallback));
  ' "$1" "$2"
}
need_pkg() { # command package
  command -v "$1" >/dev/null 2>&1 && return 0
  [ "$(id -u)" = 0 ] || { echo "missing $1: install the Debian package $2" >&2; exit 1; }
  echo "installing $2 from Debian's packages"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null
}
tcp_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

# --- Postgres ---------------------------------------------------------------------------------------
hp=$(DATABASE_URL=$DATABASE_URL hostport DATABASE_URL 5432) || exit $?
read -r PGHOST PGPORT <<< "$hp"
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
hp=$(REDIS_URL=$REDIS_URL hostport REDIS_URL 6379) || exit $?
read -r RHOST RPORT <<< "$hp"
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
elif [ -f .run/clickhouse.pid ] && kill -0 "$(head -1 .run/clickhouse.pid 2>/dev/null)" 2>/dev/null; then
  # The embedded server this checkout started still runs, for another CLICKHOUSE_URL: a second one
  # would fail on the data directory the first holds (a chdb stack naming nothing) and overwrite
  # .run/clickhouse.pid, leaving the first one out of `make down`'s and `make clean`'s reach.
  echo "clickhouse: the embedded server this checkout started (pid $(head -1 .run/clickhouse.pid)) runs, but does not answer at $CLICKHOUSE_URL: it serves the CLICKHOUSE_URL it was started with; use that, or stop it first (make down)" >&2
  exit 1
else
  # The embedded engine (chdb) behind ClickHouse's HTTP interface: infra/clickhouse/local-server.ts,
  # under the supervisor as the services are (a killed one stayed down, every log read answering 503).
  nohup node dist/infra/launch/supervise-main.js clickhouse -- dist/infra/clickhouse/local-server-main.js >> .run/clickhouse.log 2>&1 &
  ch_supervisor=$!
  echo "$ch_supervisor" > .run/clickhouse.pid
  for _ in $(seq 100); do
    curl -fsS --max-time 1 "$CLICKHOUSE_URL/ping" >/dev/null 2>&1 && break
    # Its supervisor ended: the server was left down (at once on a refused configuration).
    kill -0 "$ch_supervisor" 2>/dev/null || break
    sleep 0.2
  done
  if ! curl -fsS --max-time 1 "$CLICKHOUSE_URL/ping" >/dev/null 2>&1; then
    echo "clickhouse: the embedded server did not start at $CLICKHOUSE_URL; last lines of .run/clickhouse.log:" >&2
    tail -n 15 .run/clickhouse.log >&2
    # Nothing of this run left behind: the supervisor (if it is still starting the server again) and
    # what was started above.
    stop=(clickhouse)
    for ((i = ${#STARTED_HERE[@]} - 1; i >= 0; i--)); do stop+=("${STARTED_HERE[i]}"); done
    echo "stopping what this run started: ${stop[*]}" >&2
    bash infra/scripts/stop-all.sh "${stop[@]}" >&2
    exit 1
  fi
  started clickhouse
  echo "clickhouse: started embedded server at $CLICKHOUSE_URL (data in ${CLICKHOUSE_LOCAL_PATH:-.data/clickhouse})"
fi
