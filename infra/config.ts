// Every setting of every process, parsed once from the environment at start-up, frozen and passed
// down. No other module reads process.env: a test builds its own Config with loadConfig({...}).
import { hostname } from 'node:os';
import { z } from 'zod';
import { DEFAULT_LOCAL_CONNECTIONS, DEFAULT_LOCAL_UNCOMPRESSED_CACHE_MB } from './clickhouse/local-defaults.js';

const port = z.coerce.number().int().min(0).max(65535);
const positiveInt = z.coerce.number().int().positive();
const bool = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'])
  .transform((v) => v === 'true' || v === '1' || v === 'yes');

/**
 * The development secret earlier versions defaulted to: public, so it is refused everywhere. `make`
 * generates a random KEY_SECRET into .data/key-secret; tests and the bench set their own.
 */
export const DEV_KEY_SECRET = 'dev-only-insecure-key-secret-change-me';

const schema = z.object({
  NODE_ENV: z.enum(['development', 'production', 'test']).default('development'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),

  RELAY_HOST: z.string().default('127.0.0.1'),
  RELAY_PORT: port.default(3000),
  // uWS listens with SO_REUSEPORT unless told otherwise, so a second relay on a taken port would
  // silently share it: by default the port is taken exclusively and a taken port fails start-up.
  RELAY_REUSE_PORT: z.string().default('false').pipe(bool),
  // GET /metrics of the relay (Prometheus), apart from the public port; 0 = a free port, off = none.
  RELAY_METRICS_HOST: z.string().default('127.0.0.1'),
  RELAY_METRICS_PORT: z.union([z.literal('off'), port]).default(9465),
  CONSOLE_HOST: z.string().default('127.0.0.1'),
  CONSOLE_PORT: port.default(3001),
  // A console request must have arrived whole (headers and body) this long after it began; past it,
  // 408 and the connection closed (console-api/app.ts).
  CONSOLE_REQUEST_TIMEOUT_MS: positiveInt.default(30_000),
  // How long a console statement waits for a row another transaction holds (Postgres lock_timeout),
  // and how long any console statement may run (statement_timeout); past either the request is 503
  // DATABASE_BUSY, its transaction rolled back whole. 0 = no limit. console-api/db.ts.
  CONSOLE_DB_LOCK_TIMEOUT_MS: z.coerce.number().int().min(0).default(5_000),
  CONSOLE_DB_STATEMENT_TIMEOUT_MS: z.coerce.number().int().min(0).default(30_000),
  // The built web console console-api serves at / (make build writes it); empty = dist/console-web.
  CONSOLE_WEB_DIR: z.string().default(''),
  MOCK_UPSTREAM_PORT: port.default(3090),
  /** The OpenAI-format mock provider (bench/mock-upstream-openai/, `make run`'s channel of type 1). */
  MOCK_OPENAI_PORT: port.default(3093),

  DATABASE_URL: z.string().default('postgres://postgres@127.0.0.1:5432/gateway'),
  PG_POOL_MAX: positiveInt.default(10),
  REDIS_URL: z.string().default('redis://127.0.0.1:6379/0'),
  // Every Redis key starts with this, so that two stacks (or two test files) can share one server.
  REDIS_PREFIX: z.string().default('gw'),
  // Redis Cluster: seed nodes `host:port,host:port` (or REDIS_URL=redis+cluster://host:port,host:port).
  // Unset: one Redis at REDIS_URL. infra/redis/client.ts, docs/scaling.md.
  REDIS_CLUSTER_NODES: z.string().optional(),
  // Virtual shards accounts are spread over (user id modulo this): each has its own usage stream and
  // deadline set in its accounts' slot. 0 = the unsharded single-Redis layout; unset = 0 on one Redis,
  // 64 on a cluster (which requires > 0). Fixed for the life of the data: changing it orphans mirrors
  // and unbilled stream entries.
  REDIS_SHARDS: z.coerce.number().int().min(0).max(16384).optional(),
  // A relay marks a settlement done in its spool only once this many replicas have it (WAIT, one per
  // shard per batch of settlements, on a connection of its own); until then it is replayed, so a
  // failover cannot lose it. Unset = 1 on a cluster, 0 (no WAIT) on one Redis. 0 on a cluster without
  // replicas. docs/scaling.md, "Failover".
  REDIS_SETTLE_WAIT_REPLICAS: z.coerce.number().int().min(0).optional(),
  // How long a WAIT waits for the replicas; past it the batch's settlements are replayed later.
  REDIS_SETTLE_WAIT_MS: positiveInt.default(1000),
  // A shard whose replicas confirmed nothing for this long (its replica down or gone) has its
  // settlements confirmed on its master alone, so that the spools stop growing; 0: held until a
  // replica confirms. relay/messages/settlement-confirm.ts.
  REDIS_SETTLE_WAIT_GIVE_UP_MS: z.coerce.number().int().min(0).default(60_000),
  // A billing worker's hold on a shard's stream lasts this long unless renewed (every third of it):
  // a worker that died gives its shards up to the others after at most this.
  BILLING_SHARD_LEASE_MS: positiveInt.default(10_000),
  CLICKHOUSE_URL: z.string().url().default('http://127.0.0.1:8123'),
  CLICKHOUSE_DATABASE: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/).default('gateway'),
  CLICKHOUSE_USER: z.string().default('default'),
  CLICKHOUSE_PASSWORD: z.string().default(''),
  // A ClickHouse cluster (a name of the servers' remote_servers): migrations are the set in
  // infra/clickhouse/migrations-cluster (ReplicatedReplacingMergeTree shards behind a Distributed
  // `logs`, every statement ON CLUSTER). Empty: one server, infra/clickhouse/migrations. Chosen before
  // the first migration and never changed: the two sets build different tables. docs/scaling.md.
  CLICKHOUSE_CLUSTER: z.string().regex(/^([A-Za-z_][A-Za-z0-9_]*)?$/, { error: 'must be empty or a cluster name of letters, digits and _' }).default(''),
  // Days the request log (ClickHouse `logs` and log_stats_15m) is kept: the ClickHouse migrator sets
  // it as the tables' TTL on every run (infra/clickhouse/migrate.ts). 0 = kept forever, as before this
  // setting: switching it on deletes history, so an upgrade must not do it unasked; at 1,000 req/s
  // the log grows ~6 GB a day. Postgres' ledger, the books, is not affected. At most ten years:
  // DateTime ends in 2106 and a TTL past it would wrap to 1970, expiring every row.
  LOG_RETENTION_DAYS: z.coerce.number().int().min(0).max(3650).default(0),
  // Where the embedded (chdb) ClickHouse keeps its data when no real server answers CLICKHOUSE_URL.
  CLICKHOUSE_LOCAL_PATH: z.string().default('.data/clickhouse'),
  // Statements the embedded ClickHouse runs at once (engine connections; writes still one at a time).
  CLICKHOUSE_LOCAL_CONNECTIONS: positiveInt.default(DEFAULT_LOCAL_CONNECTIONS),
  // Its cache of decompressed blocks, which the console's log reads use (0: none).
  CLICKHOUSE_LOCAL_UNCOMPRESSED_CACHE_MB: z.coerce.number().int().min(0).default(DEFAULT_LOCAL_UNCOMPRESSED_CACHE_MB),

  // Encrypts stored API keys, channel credentials, secret options and accounts' webhook secrets
  // (AES-256-GCM) and keys the API keys' lookup hash (HMAC-SHA256). No default: the processes that seal,
  // open or look them up (relay, console-api, seed, billing for its notices) refuse to start without it
  // (infra/secrets/api-key-crypto.ts); migrations only to convert redemption codes an earlier version
  // stored in plain text (infra/postgres/migration-steps.ts). Redemption codes are sealed and hashed too.
  KEY_SECRET: z
    .string()
    .default('')
    .refine((s) => s === '' || s.length >= 16, { error: 'must be at least 16 characters (make generates 32 random bytes)' })
    .refine((s) => s !== DEV_KEY_SECRET, { error: 'is the public development value; generate one: head -c 32 /dev/urandom | base64' }),
  KEY_CACHE_TTL_MS: positiveInt.default(1000),
  // Most key records (known and unknown keys) the relay caches; the least recently used go first.
  KEY_CACHE_MAX_ENTRIES: positiveInt.default(100_000),
  // While Postgres cannot be reached, a key read within this long past its TTL is still served from
  // the cache (relay/auth/key-directory.ts); 0: every key past its TTL fails with Postgres.
  KEY_CACHE_STALE_MS: z.coerce.number().int().nonnegative().default(300_000),

  ROOT_USERNAME: z.string().min(1).default('root'),
  ROOT_PASSWORD: z.string().min(8).optional(),
  // Where a generated root password is written (mode 0600) instead of stdout, whose file is often a
  // log (make run's .run/console-api.log); unset: stdout, once.
  ROOT_PASSWORD_FILE: z.string().optional().transform((v) => (v === '' ? undefined : v)),
  SESSION_TTL_SEC: positiveInt.default(7 * 24 * 3600),
  LOGIN_RATE_LIMIT: positiveInt.default(5),
  LOGIN_RATE_WINDOW_SEC: positiveInt.default(60),
  // Per client address, whatever the username: password spraying from one address (same window).
  LOGIN_IP_RATE_LIMIT: positiveInt.default(30),
  REGISTER_RATE_LIMIT: positiveInt.default(10),
  REGISTER_RATE_WINDOW_SEC: positiveInt.default(3600),
  // scrypt runs on libuv's thread pool (4 threads, shared with DNS and fs): at most this many hashes
  // at once, at most PASSWORD_HASH_MAX_WAITING more queued; beyond that the console answers 429.
  PASSWORD_HASH_CONCURRENCY: positiveInt.default(2),
  PASSWORD_HASH_MAX_WAITING: z.coerce.number().int().nonnegative().default(32),
  CHANNEL_TEST_TIMEOUT_MS: positiveInt.default(10_000),
  PAYMENT_PROVIDER_TIMEOUT_MS: positiveInt.default(10_000),
  CARDPAY_WEBHOOK_TOLERANCE_SEC: positiveInt.default(300),

  MAX_BODY_BYTES: positiveInt.default(8 * 1024 * 1024),
  // Addresses and CIDR ranges of proxies whose X-Forwarded-For the relay and the console believe
  // (comma-separated; empty: none, the socket's address is the client's).
  TRUSTED_PROXIES: z.string().default(''),
  // The longest the relay waits for one Redis command (a reservation, a settlement): a Redis that stops
  // answering on an open connection would otherwise hold every new request until it returns. A timed
  // out reservation is answered 529 and released; a timed out settlement is tried again.
  RELAY_REDIS_COMMAND_TIMEOUT_MS: positiveInt.default(2000),
  // On SIGTERM the relay stops accepting, and waits this long at most for the exchanges in progress
  // and their settlements before it closes (what is left open is released by the reaper).
  RELAY_SHUTDOWN_GRACE_MS: z.coerce.number().int().nonnegative().default(30_000),
  // Channels tried per request (first one included) on connection errors, 429 and 5xx.
  RELAY_MAX_TRIES: positiveInt.default(3),
  // Channel health (relay/routing/channel-health.ts, README "Routing"): a channel is disabled
  // automatically (status 3) after this many channel faults in a row (401/403, credit balance too
  // low), 0 = rule off; or when faults reach this fraction of its attempts over the window, with at
  // least the minimum attempts, 0 = rule off. Each channel may override both (fault_threshold,
  // fault_rate_threshold) or opt out (auto_ban false).
  CHANNEL_FAULTS_TO_DISABLE: z.coerce.number().int().nonnegative().default(5),
  CHANNEL_FAULT_RATE_TO_DISABLE: z.coerce.number().min(0).max(1).default(0.5),
  CHANNEL_FAULT_WINDOW_SEC: positiveInt.default(60),
  CHANNEL_FAULT_RATE_MIN_ATTEMPTS: positiveInt.default(20),
  // How often a relay reports its channels' successes to Redis (never on the request path).
  CHANNEL_HEALTH_FLUSH_MS: positiveInt.default(1000),
  // The console's prober: first probe of an automatically disabled channel this long after it was
  // disabled, then doubling after each failed probe up to the maximum; the scan runs every tick.
  CHANNEL_PROBE_FIRST_SEC: positiveInt.default(30),
  CHANNEL_PROBE_MAX_SEC: positiveInt.default(1800),
  CHANNEL_PROBE_TICK_MS: positiveInt.default(5000),
  // POSTed a JSON notice when a channel is disabled automatically or re-enabled by a probe; empty =
  // none. Same outbound rules as channels (core/net/outbound-guard.ts; ChannelAllowPrivateNetworks).
  CHANNEL_HEALTH_WEBHOOK_URL: z.union([z.literal(''), z.url({ protocol: /^https?$/ })]).default(''),
  UPSTREAM_CONNECTIONS: positiveInt.default(256),
  UPSTREAM_HEADERS_TIMEOUT_MS: positiveInt.default(60_000),
  // A non-streaming answer's headers arrive only once the whole generation is done, so they get a
  // wait as long as the provider's own limit (Anthropic's SDK waits 10 minutes): a shorter one would
  // give up on generations the provider finishes and bills, and they may not be retried elsewhere.
  UPSTREAM_MESSAGE_HEADERS_TIMEOUT_MS: positiveInt.default(600_000),
  UPSTREAM_BODY_TIMEOUT_MS: positiveInt.default(300_000),
  // A reservation no live relay renewed for this long (its relay crashed) is released; relays renew
  // the ones they hold every third of it. See docs/billing.md.
  RESERVATION_TTL_SEC: positiveInt.default(900),
  // Token counting on worker threads (relay/token-count/): threads; bodies above this size are counted
  // for the reservation; safety factor of that count; batch size of delivered-text counting.
  TOKEN_WORKERS: positiveInt.default(2),
  COUNT_PROMPT_ABOVE_BYTES: positiveInt.default(8192),
  TOKEN_ESTIMATE_FACTOR: z.coerce.number().min(1).default(2),
  DELIVERED_FLUSH_BYTES: positiveInt.default(256 * 1024),
  // Prompt counts waiting for a worker beyond those running; past it, 529 overloaded_error.
  TOKEN_QUEUE_MAX: z.coerce.number().int().nonnegative().default(64),
  // count_tokens calls (and prompt counts for a reservation) per API key per minute.
  COUNT_TOKENS_PER_MINUTE: positiveInt.default(120),
  // Prompt counts (count_tokens calls and reservation counts) one account, all its keys together, may
  // have queued or running on a relay at once; past it, 429: one account's large counts would
  // otherwise hold the queue for every other account.
  COUNT_TOKENS_IN_FLIGHT_PER_ACCOUNT: positiveInt.default(4),
  RESERVATION_REAP_INTERVAL_MS: positiveInt.default(15_000),
  // Where each relay process writes its settlements until Redis took them (one file per process, in a
  // subdirectory per REDIS_PREFIX); a relay started here replays those of relays that died. Keep it on
  // local disk that survives a restart of the relay (relay/messages/settlement-spool.ts).
  RELAY_SPOOL_DIR: z.string().min(1).default('.data/relay-spool'),
  // While settlements whose retries gave up are in the spool, the relay replays them this often: a
  // Redis that resumes on the same connection (SIGSTOP/SIGCONT, a network black hole) sends no 'ready'.
  RELAY_SPOOL_REPLAY_INTERVAL_MS: positiveInt.default(5000),
  // How long a settlement may wait to go to Redis with the next reservation, in one write and one
  // script call with the others of that time (core/quota/quota-store.ts, settleSoon): the answer is
  // already on its way and the settlement in the spool, so only the refund of the reservation waits.
  RELAY_SETTLE_DELAY_MS: z.coerce.number().int().nonnegative().max(1000).default(2),
  // Credit held by the relay (core/quota/credit-slices.ts): a slice of an account's balance worth this
  // many requests' estimates, reserved from in memory; 0 reserves every request in Redis.
  RELAY_CREDIT_SLICE_REQUESTS: z.coerce.number().int().nonnegative().max(1000).default(16),
  // How long the settlement of a request reserved from a slice may wait to go to Redis with others
  // (RELAY_SETTLE_DELAY_MS for those with a reservation of their own): it refunds nothing anyone waits for.
  RELAY_CREDIT_SLICE_SETTLE_DELAY_MS: z.coerce.number().int().nonnegative().max(1000).default(10),
  // A slice's deadline, renewed every third of it: how long a killed relay's slices wait for the reaper.
  RELAY_CREDIT_SLICE_TTL_MS: z.coerce.number().int().min(100).max(3_600_000).default(15_000),

  BILLING_CONSUMER: z.string().default(`${hostname()}-${process.pid}`),
  BILLING_BATCH_SIZE: positiveInt.default(1000),
  BILLING_BLOCK_MS: positiveInt.default(100),
  BILLING_MIN_BATCH_INTERVAL_MS: z.coerce.number().int().nonnegative().default(200),
  BILLING_CLAIM_IDLE_MS: positiveInt.default(30_000),
  // The log outbox's own clock (billing/log-outbox.ts): log rows go to ClickHouse once a second in
  // inserts of up to BILLING_LOG_BATCH_SIZE rows, while settlements keep their 200 ms; ClickHouse pays
  // per insert statement (docs/performance.md, issue 17). 0: a pass after every settled batch.
  BILLING_LOG_FLUSH_INTERVAL_MS: z.coerce.number().int().nonnegative().default(500),
  BILLING_LOG_BATCH_SIZE: positiveInt.default(5000),
  // GET /metrics of the billing worker (Prometheus); port 0 = a random free port.
  BILLING_METRICS_HOST: z.string().default('127.0.0.1'),
  BILLING_METRICS_PORT: port.default(9464),

  // `make run` (and only it: it sets SEED_DEMO=true) seeds a demo account, an admin, a channel to the
  // mock provider and a demo API key. Their passwords have no default: make generates them into .data/.
  SEED_DEMO: z.string().default('false').pipe(bool),
  DEMO_PASSWORD: z.string().min(8).optional(),
  ADMIN_PASSWORD: z.string().min(8).optional(),
  /** The credential the mock provider requires and the seeded channel sends. */
  MOCK_UPSTREAM_KEY: z.string().default('sk-ant-mock-local'),
  /** The credential the OpenAI-format mock requires and the seeded OpenAI-format channel sends. */
  MOCK_OPENAI_KEY: z.string().default('sk-proj-mock-local'),
});

export type Config = Readonly<z.infer<typeof schema>>;

export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const parsed = schema.safeParse(env);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`);
    throw new Error(`invalid configuration:\n${lines.join('\n')}`);
  }
  if (parsed.data.SEED_DEMO && (!parsed.data.DEMO_PASSWORD || !parsed.data.ADMIN_PASSWORD)) {
    throw new Error('invalid configuration:\n  SEED_DEMO: needs DEMO_PASSWORD and ADMIN_PASSWORD (make run generates both into .data/)');
  }
  return Object.freeze(parsed.data);
}
