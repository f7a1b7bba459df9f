#!/usr/bin/env bash
# `make run`'s first step, before the migration and the seed: every port the stack is to listen on is
# free (or held by this checkout's own service, already running). Checked only in start-stack.sh, a
# port held by another checkout's stack stopped the start after the seed had re-sealed the shared
# database's channel credentials and replaced its demo key under this checkout's KEY_SECRET: the
# running stack then answered 401 to the key it had printed, and 404 once it reloaded its channels.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .run
# setting, check_ports, fail_start
source infra/scripts/launch-lib.sh
source infra/scripts/stack-ports.sh
for name in "${SERVICES[@]}"; do PORTS=${SERVICE_PORTS[$name]} check_ports "$name"; done
