# Sourced by start-stack.sh and check-stack-ports.sh (after launch-lib.sh): the URLs and ports of the
# stack `make run` starts, from the same settings the services read.
RELAY_HOST=$(setting RELAY_HOST 127.0.0.1); RELAY_PORT=$(setting RELAY_PORT 3000)
CONSOLE_HOST=$(setting CONSOLE_HOST 127.0.0.1); CONSOLE_PORT=$(setting CONSOLE_PORT 3001)
RELAY_URL="http://$RELAY_HOST:$RELAY_PORT"
CONSOLE_URL="http://$CONSOLE_HOST:$CONSOLE_PORT"
MOCK_URL="http://127.0.0.1:$(setting MOCK_UPSTREAM_PORT 3090)"
MOCK_OPENAI_URL="http://127.0.0.1:$(setting MOCK_OPENAI_PORT 3093)"
EPAY_PORT=$(setting EPAY_SANDBOX_PORT 3091)
# The ports each service listens on ("VARIABLE=host:port ..."), all checked before anything starts:
# one another process holds stops the start there, naming it. The relay's own port is not checked
# when it is meant to be shared (RELAY_REUSE_PORT, SO_REUSEPORT).
RELAY_PORT_SPEC="RELAY_PORT=$RELAY_HOST:$RELAY_PORT"
case "$(setting RELAY_REUSE_PORT false)" in true|1|yes) RELAY_PORT_SPEC="" ;; esac
declare -A SERVICE_PORTS=(
  [mock-upstream]="MOCK_UPSTREAM_PORT=$(setting MOCK_UPSTREAM_HOST 127.0.0.1):$(setting MOCK_UPSTREAM_PORT 3090)"
  [mock-openai]="MOCK_OPENAI_PORT=$(setting MOCK_OPENAI_HOST 127.0.0.1):$(setting MOCK_OPENAI_PORT 3093)"
  [billing]="BILLING_METRICS_PORT=$(setting BILLING_METRICS_HOST 127.0.0.1):$(setting BILLING_METRICS_PORT 9464)"
  [console-api]="CONSOLE_PORT=$CONSOLE_HOST:$CONSOLE_PORT"
  [payment-sandbox]="EPAY_SANDBOX_PORT=127.0.0.1:$EPAY_PORT CARDPAY_SANDBOX_PORT=127.0.0.1:$(setting CARDPAY_SANDBOX_PORT 3092)"
  [relay]="$RELAY_PORT_SPEC RELAY_METRICS_PORT=$(setting RELAY_METRICS_HOST 127.0.0.1):$(setting RELAY_METRICS_PORT 9465)"
)
SERVICES=(mock-upstream mock-openai billing console-api payment-sandbox relay)
