# Every target is listed by `make help`, from the `##` comment on its line.
SHELL := /bin/bash
.DEFAULT_GOAL := help
NODE_MODULES_STAMP := node_modules/.package-lock.json

# Secrets of a local stack (KEY_SECRET and the demo logins' passwords), generated once per checkout
# into .data/ by infra/scripts/local-secrets.sh, which only the recipes that need them source (here
# migrate and seed; start-stack.sh and cluster-up.sh themselves): not when the Makefile is read, so
# `make help`, `make -n …`, `make down` and `make clean` write none. An environment or command-line
# KEY_SECRET, DEMO_PASSWORD or ADMIN_PASSWORD is used as given.
WITH_LOCAL_SECRETS := . infra/scripts/local-secrets.sh &&

.PHONY: help install build typecheck infra migrate seed run-ports run test down bench clean replay-dead-letters cluster-up cluster-down

# Names padded to the longest one, so that every description starts in the same column.
help: ## List the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "} \
	  {name[NR] = $$1; text[NR] = $$2; if (length($$1) > width) width = length($$1)} \
	  END {for (i = 1; i <= NR; i++) printf "  make %-" width "s  %s\n", name[i], text[i]}'

$(NODE_MODULES_STAMP): package.json package-lock.json $(wildcard patches/*.patch)
	@bash infra/scripts/install-prerequisites.sh
	@# npm install, not npm ci: chdb's optional binaries for other platforms are absent from the
	@# registry here, which npm ci counts as a lock-file mismatch. The lock file still pins every version.
	npm install --no-audit --no-fund
	@touch $@

install: $(NODE_MODULES_STAMP) ## Install system prerequisites and npm dependencies (only what is missing)

build: install ## Compile TypeScript into dist/ (TypeScript 7, strict) and build the web console into dist/console-web
	npx tsc -p tsconfig.json
	@# The web console's API types come from the console's own OpenAPI document (console-web/README.md).
	node dist/console-api/http/write-web-api-types.js
	@# Built beside the served one and swapped in: a console-api running from dist/ (a second make run)
	@# never finds the directory emptied (it answered 503 while Vite wrote it).
	npx vite build --config console-web/vite.config.ts --logLevel warn --outDir "$(CURDIR)/dist/console-web.next"
	@rm -rf dist/console-web.old && if [ -d dist/console-web ]; then mv dist/console-web dist/console-web.old; fi \
		&& mv dist/console-web.next dist/console-web && rm -rf dist/console-web.old

typecheck: install ## Type-check sources and tests without writing dist/
	npx tsc --noEmit -p tsconfig.json
	npx tsc --noEmit -p tsconfig.test.json
	npx tsc --noEmit -p console-web/tsconfig.json

infra: build ## Use Postgres, Redis and ClickHouse at their URLs, or start local ones under .data/
	@bash infra/scripts/ensure-services.sh

migrate: infra ## Apply Postgres and ClickHouse migrations (safe to repeat)
	$(WITH_LOCAL_SECRETS) node dist/infra/migrate-main.js

seed: migrate ## Create the demo account, admin, mock channels (Anthropic and OpenAI format) and demo API key (idempotent; local demo only)
	$(WITH_LOCAL_SECRETS) SEED_DEMO=$${SEED_DEMO:-true} node dist/console-api/seed/seed-main.js

# Before the seed: a port held by another checkout's stack fails the start before the seed writes to
# the database that stack shares (infra/scripts/check-stack-ports.sh).
run-ports: ## Check that no other process holds a port the stack is to listen on (make run does, before migrating)
	@bash infra/scripts/check-stack-ports.sh

run: run-ports seed ## Start the whole stack (relay, billing, console-api, the two mock providers, payment sandboxes) and print how to call it
	@bash infra/scripts/start-stack.sh

test: build typecheck ## Type-check, then run every test (unit and integration) against the real services; leaves nothing running
	@bash infra/scripts/run-tests.sh

bench: build ## Run the benchmark suite on its own stack; report in bench/results/latest/
	@bash infra/scripts/ensure-services.sh
	node dist/bench/run-bench.js

.PHONY: chaos
chaos: build ## Run the chaos suite with the issue's fault durations (CHAOS_SCALE=1): every fault on a stack of its own, the money audit after each; report in .data/chaos/
	@bash infra/scripts/ensure-services.sh
	CHAOS_SCALE=$${CHAOS_SCALE:-1} npx vitest run tests/chaos/chaos.integration.test.ts

replay-dead-letters: build ## Move dead-lettered usage events that decode now back to the usage stream (idempotent; see docs/billing.md)
	$(WITH_LOCAL_SECRETS) node dist/billing/replay-dead-letters.js

cluster-up: seed ## Like run, scaled out: Redis Cluster (3 masters + 3 replicas, 7000-7005), 2 relays (3000, 3002), 2 billing workers
	@bash infra/scripts/cluster-up.sh

cluster-down: ## Stop, by PID, everything `make cluster-up` started, the Redis Cluster included
	@bash infra/scripts/cluster-down.sh

down: ## Stop, by PID, everything `make run` started (a relay is given its drain: RELAY_SHUTDOWN_GRACE_MS and more)
	@bash infra/scripts/stop-all.sh

clean: ## Stop everything `make run` or `make cluster-up` started; delete dist/, .run/ and .data/ (but not its secrets, nor a relay spool still holding settlements and, with one, the Redis data it settles against)
	@bash infra/scripts/clean.sh
