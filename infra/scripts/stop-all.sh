#!/usr/bin/env bash
# Stops, by PID, every process `make run` started (services first, databases last), or only the
# ones named as arguments (run-tests.sh stops what it started, nothing else).
cd "$(dirname "$0")/../.."
NAMES=("$@")
[ ${#NAMES[@]} -gt 0 ] || NAMES=(relay console-api payment-sandbox billing mock-upstream mock-openai clickhouse redis postgres)
for name in "${NAMES[@]}"; do
  f=.run/$name.pid
  [ -f "$f" ] || continue
  pid=$(cat "$f")
  if [ "$name" = postgres ]; then
    PGDATA=$PWD/.data/postgres; PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
    RUNAS=(); [ "$(id -u)" = 0 ] && RUNAS=(runuser -u postgres --)
    "${RUNAS[@]}" "$PGBIN/pg_ctl" -D "$PGDATA" -m fast stop >/dev/null 2>&1 || kill "$pid" 2>/dev/null
  elif kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    # A supervisor that did not end in time: its child first, so that none is left behind.
    kill -0 "$pid" 2>/dev/null && { pkill -9 -P "$pid" 2>/dev/null; kill -9 "$pid"; }
  fi
  rm -f "$f"
  echo "stopped $name ($pid)"
done
