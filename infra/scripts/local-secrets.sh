# Sourced, from the repository's root, by what needs the secrets of a local stack: the make targets
# migrate and seed, start-stack.sh (`make run`) and cluster-up.sh (`make cluster-up`). Never when the
# Makefile is read: `make help`, `make -n …`, `make down` and `make clean` write no secret.
#
# Exports KEY_SECRET (seals API keys, credentials and secret options), DEMO_PASSWORD and
# ADMIN_PASSWORD (the demo logins only `make run` seeds): each as the environment gives it, else read
# from .data/<file>, generated there once per checkout (random bytes, base64 without / + =; never a
# public default). Owner-only (umask 077 while writing, chmod for files an older Makefile left
# world-readable): any local account reading key-secret could open every sealed key. Only the files:
# Postgres, running as its own user, still goes through .data/ to its folder.
#
# `make clean` keeps these files (infra/scripts/clean.sh): they open what the database holds.

local_secret() { # VAR file bytes
  local var=$1 file=.data/$2 bytes=$3
  if [ -z "${!var:-}" ]; then
    mkdir -p .data || return 1
    if [ ! -s "$file" ]; then
      # URL-safe base64 without padding: always 4/3 of the bytes long (43 characters for 32). Deleting
      # `/` and `+` instead left a random number fewer (a KEY_SECRET of 39 characters in a CI run).
      (umask 077 && head -c "$bytes" /dev/urandom | base64 -w0 | tr '+/' '-_' | tr -d '=' > "$file") || return 1
    fi
    chmod 600 "$file" || return 1
    printf -v "$var" '%s' "$(cat "$file")"
  fi
  export "$var"
}

local_secret KEY_SECRET key-secret 32 \
  && local_secret DEMO_PASSWORD demo-password 12 \
  && local_secret ADMIN_PASSWORD admin-password 12
