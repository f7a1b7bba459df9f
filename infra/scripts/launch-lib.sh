# Sourced by start-stack.sh (`make run`) and cluster-up.sh (`make cluster-up`): how a service of the
# stack is started and waited for. Run from the repository's root, with .run/ made.

start() { # name script [VAR=value ...]; NODE_FLAGS: the Node flags to start it with
  local name=$1 script=$2; shift 2
  if [ -f ".run/$name.pid" ] && kill -0 "$(cat ".run/$name.pid")" 2>/dev/null; then
    echo "$name: already running (pid $(cat ".run/$name.pid"))"; return
  fi
  # Under supervise-main.js: started again when it fails (infra/launch/supervise.ts); the PID is the supervisor's.
  # shellcheck disable=SC2086 # the flags are words
  env "$@" nohup node dist/infra/launch/supervise-main.js "$name" -- ${NODE_FLAGS:-} "$script" >> ".run/$name.log" 2>&1 &
  echo $! > ".run/$name.pid"
}

wait_http() { # name url
  for _ in $(seq 100); do curl -s -o /dev/null --max-time 1 "$2" && return 0; sleep 0.1; done
  echo "$1 did not come up; last lines of .run/$1.log:" >&2; tail -20 ".run/$1.log" >&2; exit 1
}
