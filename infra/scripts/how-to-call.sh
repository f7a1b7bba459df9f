#!/usr/bin/env bash
# The "how to call it" text of a running local stack (make run, make cluster-up): its URLs, the demo
# logins and a curl command with the demo key. Reads RELAY_URL, CONSOLE_URL, MOCK_URL, MOCK_OPENAI_URL
# (optional: the OpenAI-format mock); EXTRA_LINES (optional) is printed under the URLs.
set -euo pipefail
cd "$(dirname "$0")/../.."
STOP_COMMAND=${STOP_COMMAND:-make down}
# The demo key, and as its owner left it: disabled or expired in the console, the commands below answer 401.
KEY_LINES=$(node dist/console-api/seed/print-demo-key.js --with-refusal)
DEMO_KEY=$(sed -n 1p <<<"$KEY_LINES")
DEMO_KEY_REFUSAL=$(sed -n 2p <<<"$KEY_LINES")
DEMO_LOGINS=$(node dist/console-api/seed/print-demo-key.js --logins)
KEY_NOTE=""
[ -n "$DEMO_KEY_REFUSAL" ] && KEY_NOTE=" (it is $DEMO_KEY_REFUSAL: enable or renew the key \"demo\" on the console's Keys page, signed in as demo, or these answer 401)"
# console-api writes a generated root password to ROOT_PASSWORD_FILE (start-stack.sh), not to its log.
ROOT_FILE=${ROOT_PASSWORD_FILE:-.data/root-password}
ROOT_LINE=""
# Shown only while it is still root's password (a second make run printed one changed since).
[ -r "$ROOT_FILE" ] && ROOT_LINE=$(node dist/console-api/seed/print-demo-key.js --root "$ROOT_FILE")
# The model of the example: one the seeded mock channel serves (console-api/seed/demo-seed.ts) and the
# price table prices (core/pricing/ratios.ts), and not deprecated: the Anthropic SDK warns that
# claude-sonnet-4-5 reaches end of life on 2026-11-30.
cat <<MSG

The gateway is up.
  web console   $CONSOLE_URL/       (open it in a browser; log in with a demo login below)
  relay         $RELAY_URL        (POST /v1/messages, POST /v1/chat/completions)
  console-api   $CONSOLE_URL        (GET /api/...; endpoints in console-api/README.md)
  mock provider $MOCK_URL${MOCK_OPENAI_URL:+
  mock OpenAI   $MOCK_OPENAI_URL  (an OpenAI-format channel, type 1: gpt-4o-mini, gpt-4o, gpt-4.1)}
  payments      http://127.0.0.1:${EPAY_SANDBOX_PORT:-3091} (epay sandbox), http://127.0.0.1:${CARDPAY_SANDBOX_PORT:-3092} (card sandbox)
${EXTRA_LINES:+$EXTRA_LINES
}  logs          .run/*.log        stop everything with: $STOP_COMMAND
  demo logins   ${DEMO_LOGINS}
                (local demo data seeded by make run; passwords generated into .data/)${ROOT_LINE:+
  root          $ROOT_LINE}

Call the relay with the demo key${KEY_NOTE}:

  curl -sN $RELAY_URL/v1/messages \\
    -H 'x-api-key: $DEMO_KEY' -H 'anthropic-version: 2023-06-01' -H 'content-type: application/json' \\
    -d '{"model":"claude-haiku-4-5","max_tokens":32,"stream":true,"messages":[{"role":"user","content":"Hello"}]}'

or as an OpenAI client (a Claude model is converted; a GPT model goes to the OpenAI-format channel):

  curl -sN $RELAY_URL/v1/chat/completions \\
    -H 'authorization: Bearer $DEMO_KEY' -H 'content-type: application/json' \\
    -d '{"model":"gpt-4o-mini","max_tokens":32,"stream":true,"messages":[{"role":"user","content":"Hello"}]}'

MSG
