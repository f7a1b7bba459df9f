# Sourced by start-stack.sh (`make run`) and cluster-up.sh (`make cluster-up`): how a service of the
# stack is started, waited for and checked, and what a start that fails leaves: nothing it started.
# Run from the repository's root, with .run/ made.
#
# A start fails, naming the cause, when
#   - a port a service is to listen on is already taken (check_ports, start: PORTS), naming the
#     process holding it (before, the foreign process answered the wait, "The gateway is up." was
#     printed and the service crash-looped behind it);
#   - a service does not answer within 10 s, or its supervisor left it down (a refused configuration,
#     exit 78, at once) (wait_http);
#   - a service this start started exited since, or is not running (check_running): its supervisor
#     starts a failed child again, so having answered once proves little.
# Every service this start started is then stopped again (stop-all.sh, in the reverse order: a relay
# first, with its drain), and what still runs from before is named with the command that stops it.

STARTED=()
# The size of each started service's log when it was started: its supervisor's lines past it are this start's.
declare -A LOG_MARK=()

# A setting as the services read it: blank counts as unset (infra/config.ts), spaces dropped.
setting() { # VARIABLE default
  local v=${!1:-}
  v=${v//[[:space:]]/}
  echo "${v:-$2}"
}

# The processes listening on a TCP port, on any address ("node (pid 123)"), as `ss -ltnp` shows
# them; empty when it cannot (no ss, or another user's process seen without root).
port_holder() { # port
  command -v ss >/dev/null 2>&1 || return 0
  ss -Hltnp "sport = :$1" 2>/dev/null | grep -o 'users:((.*))' | grep -oE '"[^"]*",pid=[0-9]+' \
    | sed -E 's/^"([^"]*)",pid=([0-9]+)$/\1 (pid \2)/' | sort -u | paste -sd, - | sed 's/,/, /g'
}

# Whether a listener already holds host:port: one on this address or on every address (or any one,
# when host is every address or a host name). Without ss, whether a connection there is accepted.
port_taken() { # host port
  local host=$1 port=$2 addr
  if command -v ss >/dev/null 2>&1; then
    while read -r addr; do
      addr=${addr%:*}; addr=${addr%%\%*}; addr=${addr#[}; addr=${addr%]}
      case "$addr" in 0.0.0.0|'*'|::|"$host") return 0 ;; esac
      case "$host" in 0.0.0.0|::|*[!0-9a-fA-F.:]*) return 0 ;; esac
    done < <(ss -Hltn "sport = :$port" 2>/dev/null | awk '{print $4}')
    return 1
  fi
  case "$host" in 0.0.0.0|::) host=127.0.0.1 ;; esac
  (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null
}

# The start failed: the lines given, then every service this start started stopped, and exit 1.
fail_start() { # lines...
  printf '%s\n' "$@" >&2
  local stop=() i f others=()
  for ((i = ${#STARTED[@]} - 1; i >= 0; i--)); do stop+=("${STARTED[i]}"); done
  if [ ${#stop[@]} -gt 0 ]; then
    echo "stopping what this start started: ${stop[*]} (their logs stay in .run/)" >&2
    bash infra/scripts/stop-all.sh "${stop[@]}" >&2
  fi
  for f in .run/*.pid; do
    [ -f "$f" ] && kill -0 "$(head -1 "$f")" 2>/dev/null && others+=("$(basename "$f" .pid)")
  done
  for f in .data/redis-cluster/*/redis.pid; do
    [ -f "$f" ] && kill -0 "$(head -1 "$f")" 2>/dev/null && { others+=("the Redis Cluster"); break; }
  done
  [ ${#others[@]} -eq 0 ] || echo "still running, started before (by make infra or an earlier start): ${others[*]}; ${STOP_COMMAND:-make down} stops them" >&2
  exit 1
}

running() { # name: its supervisor of .run/ is alive
  [ -f ".run/$1.pid" ] && kill -0 "$(cat ".run/$1.pid")" 2>/dev/null
}

# Fails the start when a port the service is to listen on is taken (unless the service already runs:
# then it is its own). PORTS: "VARIABLE=host:port ..." ("=host:port": a port the script fixes, no
# variable moves it); a port 0 (any free one) or off is not checked.
check_ports() { # name
  local name=$1 spec var host port holder
  running "$name" && return 0
  for spec in ${PORTS:-}; do
    var=${spec%%=*}; host=${spec#*=}; port=${host##*:}; host=${host%:*}
    case "$port" in ''|0|off) continue ;; esac
    if port_taken "$host" "$port"; then
      holder=$(port_holder "$port" || true)
      if [ -n "$var" ]; then
        fail_start "$name: not started: port $port ($var, on $host) is already in use${holder:+ by $holder}; stop that process or set $var to a free port"
      fi
      fail_start "$name: not started: port $port (on $host) is already in use${holder:+ by $holder}; stop that process: $name listens on this port here"
    fi
  done
}

start() { # name script [VAR=value ...]; NODE_FLAGS: the Node flags to start it with; PORTS: "VARIABLE=host:port ..." it listens on
  local name=$1 script=$2; shift 2
  if running "$name"; then
    echo "$name: already running (pid $(cat ".run/$name.pid"))"; return
  fi
  # Checked again here, though start-stack.sh checks every port before it starts anything: a port
  # taken in between.
  check_ports "$name"
  LOG_MARK[$name]=$(stat -c %s ".run/$name.log" 2>/dev/null || echo 0)
  # Under supervise-main.js: started again when it fails (infra/launch/supervise.ts); the PID is the supervisor's.
  # shellcheck disable=SC2086 # the flags are words
  env "$@" nohup node dist/infra/launch/supervise-main.js "$name" -- ${NODE_FLAGS:-} "$script" >> ".run/$name.log" 2>&1 &
  echo $! > ".run/$name.pid"
  STARTED+=("$name")
}

# The last lines of a service's log, of this start only when this start started it.
log_tail() { # name lines
  tail -c +"$(( ${LOG_MARK[$1]:-0} + 1 ))" ".run/$1.log" 2>/dev/null | tail -n "$2"
}

wait_http() { # name url
  local pid
  pid=$(cat ".run/$1.pid" 2>/dev/null || true)
  for _ in $(seq 100); do
    curl -s -o /dev/null --max-time 1 "$2" && return 0
    # Its supervisor ended: the service was left down (a refused configuration: at its first exit).
    [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null && break
    sleep 0.1
  done
  fail_start "$1 did not come up at $2; last lines of .run/$1.log:" "$(log_tail "$1" 20)"
}

# After the waits: each named service runs (its supervisor has a child), and none this start started
# has exited since (its supervisor's "exited" line in the log past LOG_MARK).
check_running() { # names...
  sleep "${CHECK_RUNNING_AFTER_SEC:-1}"
  local name pid why lines=()
  for name in "$@"; do
    pid=$(cat ".run/$name.pid" 2>/dev/null || true)
    why=""
    if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
      why="its supervisor ended: left down"
    elif ! pgrep -P "$pid" >/dev/null 2>&1; then
      why="not running: its supervisor is waiting to start it again"
    elif [ -n "${LOG_MARK[$name]+x}" ] && log_tail "$name" 100000 | grep -q "^supervise: $name exited"; then
      why="it exited after starting and was started again"
    fi
    [ -z "$why" ] || lines+=("$name failed: $why; last lines of .run/$name.log:" "$(log_tail "$name" 12)")
  done
  [ ${#lines[@]} -eq 0 ] || fail_start "${lines[@]}"
}
