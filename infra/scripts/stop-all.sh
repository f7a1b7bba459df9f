#!/usr/bin/env bash
# Stops, by PID, every process `make run` started (services first, databases last), or only the
# ones named as arguments (run-tests.sh stops what it started, nothing else; cluster-down.sh names
# relay-2 and billing-2 too).
#
# SIGTERM, then a wait for the process to end, then SIGKILL (the supervisor's child first). The wait
# is each service's own shutdown, not one figure for all:
#   - a relay (relay, relay-2, ...) drains: it stops accepting and lets the exchanges in progress
#     finish for up to RELAY_SHUTDOWN_GRACE_MS (infra/config.ts, default 30000), then cuts what is
#     left and settles it for what it delivered (up to 5 s), then closes Redis and Postgres (up to
#     5 s more). Killed sooner, a stream in progress is cut with no end event and its tokens are never
#     billed: its reservation is released by the reaper, the request served free. So it gets the
#     grace plus RELAY_CLOSE_MARGIN_SEC. The grace is read from the running process's own environment
#     (/proc/<pid>/environ: what the relay was started with), else from this shell's, else 30000.
#   - a billing worker (billing, billing-2, ...) ends the batch in progress (or its retry backoff, up
#     to 5 s), makes a last pass over the log outbox to ClickHouse (a request may take up to 30 s, its
#     client's timeout), then closes Postgres (up to 5 s): BILLING_STOP_SEC. Killing it loses nothing
#     (what it read and did not acknowledge is read again; outbox rows stay in Postgres), but is
#     replayed on its next start.
#   - every other service: OTHER_STOP_SEC.
# Consecutive relays are signalled together and waited for together (cluster-down.sh: relay relay-2),
# billing workers likewise, and the console-api with the payment sandbox, the mock providers with each
# other (group_of); each group is stopped before the next, so that the mock provider and the billing
# worker outlive the relays' drain. What is waited for is printed as it goes.
cd "$(dirname "$0")/../.."

DEFAULT_RELAY_SHUTDOWN_GRACE_MS=30000 # infra/config.ts
RELAY_CLOSE_MARGIN_SEC=15
BILLING_STOP_SEC=45
OTHER_STOP_SEC=5
# How often a long wait says it is still waiting.
PROGRESS_EVERY_SEC=5

NAMES=("$@")
[ ${#NAMES[@]} -gt 0 ] || NAMES=(relay console-api payment-sandbox billing mock-upstream mock-openai clickhouse redis postgres)

# relay-2 is a relay, billing-2 a billing worker.
kind_of() { local n=$1; [[ $n =~ ^(.+)-[0-9]+$ ]] && n=${BASH_REMATCH[1]}; echo "$n"; }

# RELAY_SHUTDOWN_GRACE_MS as the process with this pid has it (its supervisor passes its environment
# to the relay), else as this shell has it; printed in whole milliseconds. Parsed defensively: a value
# that is not plain digits (spaces aside; zod's coercion also takes forms such as 1e5, which nobody
# writes) counts as the default, said on stderr, and a huge one is capped rather than overflowing the
# shell's arithmetic.
relay_grace_ms() { # pid
  local raw set=0
  if [ -r "/proc/$1/environ" ] && raw=$(tr '\0' '\n' < "/proc/$1/environ" 2>/dev/null); then
    if grep -q '^RELAY_SHUTDOWN_GRACE_MS=' <<< "$raw"; then
      raw=$(sed -n 's/^RELAY_SHUTDOWN_GRACE_MS=//p' <<< "$raw" | tail -1); set=1
    fi
  elif [ -n "${RELAY_SHUTDOWN_GRACE_MS+x}" ]; then
    raw=$RELAY_SHUTDOWN_GRACE_MS; set=1
  fi
  [ "$set" = 1 ] || { echo "$DEFAULT_RELAY_SHUTDOWN_GRACE_MS"; return; }
  local v=${raw//[[:space:]]/}
  if [[ ! $v =~ ^[0-9]+$ ]]; then
    echo "RELAY_SHUTDOWN_GRACE_MS='${raw:0:40}' is not a whole number of milliseconds: waiting as for $DEFAULT_RELAY_SHUTDOWN_GRACE_MS" >&2
    echo "$DEFAULT_RELAY_SHUTDOWN_GRACE_MS"; return
  fi
  v=${v#"${v%%[!0]*}"}; v=${v:-0}
  [ ${#v} -le 12 ] || v=999999999999
  echo "$v"
}

# Seconds between SIGTERM and SIGKILL for this service (sets WAIT_SEC and WAIT_WHY).
stop_wait() { # name pid
  local grace_ms
  case "$(kind_of "$1")" in
    relay)
      grace_ms=$(relay_grace_ms "$2")
      WAIT_SEC=$(( (grace_ms + 999) / 1000 + RELAY_CLOSE_MARGIN_SEC ))
      WAIT_WHY="its drain: the exchanges in progress finish and are billed (RELAY_SHUTDOWN_GRACE_MS=$grace_ms, then up to ${RELAY_CLOSE_MARGIN_SEC} s to settle and close)" ;;
    billing)
      WAIT_SEC=$BILLING_STOP_SEC
      WAIT_WHY="its shutdown: the batch in progress, a last pass of the log outbox to ClickHouse, Postgres closed" ;;
    *) WAIT_SEC=$OTHER_STOP_SEC; WAIT_WHY="" ;;
  esac
}

stop_postgres() { # pid
  local PGDATA PGBIN RUNAS=()
  PGDATA=$PWD/.data/postgres; PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
  [ "$(id -u)" = 0 ] && RUNAS=(runuser -u postgres --)
  "${RUNAS[@]}" "$PGBIN/pg_ctl" -D "$PGDATA" -m fast stop >/dev/null 2>&1 || kill "$1" 2>/dev/null
}

# Signals every named service of the group, then waits for each until its own deadline.
stop_group() { # names...
  local name f pid now i
  local -a names=() pids=() deadlines=() waits=() started=()
  for name in "$@"; do
    f=.run/$name.pid
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    if [ "$name" = postgres ]; then
      stop_postgres "$pid"
      rm -f "$f"; echo "stopped $name ($pid)"
      continue
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      rm -f "$f"; echo "stopped $name ($pid)"
      continue
    fi
    stop_wait "$name" "$pid"
    kill "$pid" 2>/dev/null
    [ -z "$WAIT_WHY" ] || echo "$name ($pid): stopping; waiting up to $WAIT_SEC s for $WAIT_WHY"
    names+=("$name"); pids+=("$pid"); waits+=("$WAIT_SEC")
    deadlines+=($(( SECONDS + WAIT_SEC ))); started+=("$SECONDS")
  done
  local left=${#names[@]} last_note=$SECONDS
  while [ "$left" -gt 0 ]; do
    left=0
    for i in "${!names[@]}"; do
      [ -n "${pids[$i]}" ] || continue
      pid=${pids[$i]}
      if ! kill -0 "$pid" 2>/dev/null; then
        rm -f ".run/${names[$i]}.pid"
        now=$(( SECONDS - started[i] ))
        if [ "${waits[$i]}" -gt "$OTHER_STOP_SEC" ]; then echo "stopped ${names[$i]} ($pid) after $now s"; else echo "stopped ${names[$i]} ($pid)"; fi
        pids[i]=""
      elif [ "$SECONDS" -ge "${deadlines[$i]}" ]; then
        # A supervisor that did not end in time: its child first, so that none is left behind.
        pkill -9 -P "$pid" 2>/dev/null; kill -9 "$pid" 2>/dev/null
        rm -f ".run/${names[$i]}.pid"
        echo "${names[$i]} ($pid) did not stop within ${waits[$i]} s: killed (SIGKILL)" >&2
        pids[i]=""
      else
        left=$((left + 1))
      fi
    done
    [ "$left" -gt 0 ] || break
    if [ $(( SECONDS - last_note )) -ge "$PROGRESS_EVERY_SEC" ]; then
      last_note=$SECONDS
      for i in "${!names[@]}"; do
        [ -n "${pids[$i]}" ] && [ "${waits[$i]}" -gt "$OTHER_STOP_SEC" ] \
          && echo "  ${names[$i]} (${pids[$i]}): still stopping after $(( SECONDS - started[i] )) s (at most ${waits[$i]} s)"
      done
    fi
    sleep 0.1
  done
}

# Which services stop together: the relays; the console-api and the payment sandbox (nothing waits
# on them); the billing workers; the mock providers (the relays' drain is over by then). Each took
# ~2 s in turn, and an idle stack's make down took 13 s.
group_of() { # name
  local kind; kind=$(kind_of "$1")
  case "$kind" in
    console-api|payment-sandbox) echo front ;;
    mock-upstream|mock-openai) echo mocks ;;
    *) echo "$kind" ;;
  esac
}

any_running=0
for name in "${NAMES[@]}"; do [ -f ".run/$name.pid" ] && any_running=1; done

# Consecutive names of one group (relay relay-2; billing billing-2; the mocks) stop together.
group=()
for name in "${NAMES[@]}"; do
  if [ ${#group[@]} -gt 0 ] && [ "$(group_of "$name")" != "$(group_of "${group[0]}")" ]; then
    stop_group "${group[@]}"; group=()
  fi
  group+=("$name")
done
[ ${#group[@]} -eq 0 ] || stop_group "${group[@]}"
[ "$any_running" = 1 ] || echo "nothing to stop: no process started by make run is recorded in .run/"

# `make down` after `make cluster-up`: say what only `make cluster-down` stops.
if [ $# -eq 0 ]; then
  others=()
  for name in relay-2 billing-2; do
    [ -f ".run/$name.pid" ] && kill -0 "$(cat ".run/$name.pid")" 2>/dev/null && others+=("$name")
  done
  for f in .data/redis-cluster/*/redis.pid; do
    [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null && { others+=("the Redis Cluster"); break; }
  done
  [ ${#others[@]} -eq 0 ] || echo "still running, started by make cluster-up: ${others[*]}; make cluster-down stops them" >&2
fi
exit 0
