// Every setting of every process, parsed once from the environment at start-up, frozen and passed
// down. No other module reads process.env: a test builds its own Config with loadConfig({...}).
//
// The rules every variable follows (README, "Configuration"):
//   - empty or blank (`VAR=`, `VAR=" "`) is unset, the documented default: what such a line in an env
//     or compose file means to most people. Before, z.coerce.number() turned it into 0 (RELAY_PORT= a
//     random port, RELAY_SHUTDOWN_GRACE_MS= no drain, CHANNEL_FAULTS_TO_DISABLE= the rule off). Only
//     the variables of KEEP_EMPTY, whose empty value is a documented setting of its own, take it as is;
//   - numbers are plain decimal as people write them: `0x10`, `1e3`, `+5`, ` 80 ` are refused, not
//     read as something else;
//   - every number has an upper bound, durations the longest a Node timer can wait;
//   - a refused value stops the process with one line per variable, its value shown unless secret.
import { hostname } from 'node:os';
import { isIP } from 'node:net';
import { z } from 'zod';
import { DEFAULT_LOCAL_CONNECTIONS, DEFAULT_LOCAL_UNCOMPRESSED_CACHE_MB } from './clickhouse/local-defaults.js';

/**
 * The longest delay setTimeout/setInterval take: past it Node fires them after 1 ms (a reap interval
 * of 3,000,000,000 ms made the billing worker reap every millisecond). Every duration is bounded by it.
 */
export const MAX_TIMER_MS = 2_147_483_647;
const MAX_TIMER_SEC = Math.floor(MAX_TIMER_MS / 1000);
/** The bound of a whole number that states none of its own. */
const MAX_WHOLE = 2_147_483_647;
/** SESSION_TTL_SEC feeds no timer (a stored expiry and a cookie's Max-Age): bounded at ten years instead. */
const TEN_YEARS_SEC = 3650 * 24 * 3600;

function whole(min: number, max: number, unit?: string) {
  const allowed = `expected a whole number${unit ? ` of ${unit}` : ''} from ${min} to ${max}, in decimal digits`;
  return z.string().transform((s, ctx) => {
    const n = /^\d+$/.test(s) ? Number(s) : Number.NaN;
    if (n >= min && n <= max) return n;
    ctx.addIssue({ code: 'custom', message: allowed });
    return z.NEVER;
  });
}

function decimal(min: number, max: number) {
  const allowed = `expected a decimal number from ${min} to ${max} (such as ${min === 0 ? '0.5' : '1.5'})`;
  return z.string().transform((s, ctx) => {
    const n = /^(\d+(\.\d+)?|\.\d+)$/.test(s) ? Number(s) : Number.NaN;
    if (n >= min && n <= max) return n;
    ctx.addIssue({ code: 'custom', message: allowed });
    return z.NEVER;
  });
}

const port = whole(0, 65535);
/** A duration in milliseconds that a timer waits for (or is compared with one that does). */
const ms = (min = 1) => whole(min, MAX_TIMER_MS, 'milliseconds');
const sec = (min = 1) => whole(min, MAX_TIMER_SEC, 'seconds');
const count = (min = 1) => whole(min, MAX_WHOLE);

const BOOL_VALUES = ['true', 'false', '1', '0', 'yes', 'no'] as const;
const bool = z
  .enum(BOOL_VALUES, { error: `expected one of ${BOOL_VALUES.join(', ')}` })
  .transform((v) => v === 'true' || v === '1' || v === 'yes');

function oneOf<const T extends readonly [string, ...string[]]>(values: T) {
  return z.enum(values, { error: `expected one of ${values.join(', ')}` });
}

/** A name of DNS labels (underscores too: compose service names have them), not dotted digits. */
const HOST_NAME = /^(?=.{1,253}$)[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*\.?$/;

function isHost(s: string): boolean {
  if (isIP(s) !== 0) return true;
  return HOST_NAME.test(s) && !/^[\d.]+$/.test(s);
}

/** An address to listen on. Empty is the default (loopback), never every interface: that takes 0.0.0.0 or ::. */
const listenHost = z.string().refine(isHost, { error: 'expected an IP address (0.0.0.0 for every interface) or a host name' });

function parsedUrl(s: string): URL | null {
  // new URL trims spaces and control characters silently; a value is taken only as written.
  if (s !== s.trim() || /[\s\x00-\x1f]/.test(s)) return null;
  try {
    return new URL(s);
  } catch {
    return null;
  }
}

/** `host:port`, as infra/redis/client.ts reads a seed node. */
function hostPortProblem(node: string): string | null {
  const m = /^(.+):(\d+)$/.exec(node);
  const port = m ? Number(m[2]) : 0;
  return m && isHost(m[1]!) && port >= 1 && port <= 65535 ? null : `"${node}" is not host:port`;
}

function clusterNodesProblem(list: string): string | null {
  const nodes = list.split(',').map((n) => n.trim());
  if (nodes.every((n) => n === '')) return 'expected seed nodes host:port,host:port';
  for (const node of nodes) {
    if (node === '') continue;
    const problem = hostPortProblem(node);
    if (problem) return `${problem}; expected seed nodes host:port,host:port`;
  }
  return null;
}

const REDIS_URL_FORMS = 'redis://host:port/db, rediss://host:port/db or redis+cluster://host:port,host:port';

/**
 * ioredis takes any string: an unknown scheme, a path that is no number or a database the server does
 * not have all ended on database 0, another stack's keys. What the server has is checked when the
 * connection opens (infra/redis/client.ts); here the form.
 */
function redisUrlProblem(s: string): string | null {
  if (s.startsWith('redis+cluster://')) {
    const [nodes = '', ...path] = s.slice('redis+cluster://'.length).split('/');
    const problem = clusterNodesProblem(nodes);
    if (problem) return `${problem} (${REDIS_URL_FORMS})`;
    const db = path.join('/');
    return db === '' || db === '0' ? null : 'a Redis Cluster has database 0 only: redis+cluster://host:port,host:port[/0]';
  }
  const url = parsedUrl(s);
  if (!url || (url.protocol !== 'redis:' && url.protocol !== 'rediss:') || url.hostname === '') return `expected ${REDIS_URL_FORMS}`;
  const db = url.pathname.slice(1);
  if (db === '') return null;
  return /^\d+$/.test(db) && Number(db) <= MAX_WHOLE ? null : `the path is the database index, a whole number in decimal digits (expected ${REDIS_URL_FORMS})`;
}

function postgresUrlProblem(s: string): string | null {
  const url = parsedUrl(s);
  const ok = url !== null && (url.protocol === 'postgres:' || url.protocol === 'postgresql:') && url.pathname.length > 1;
  return ok ? null : 'expected postgres://user@host:port/database (or postgresql://…), with a database name';
}

function httpUrlProblem(s: string): string | null {
  const url = parsedUrl(s);
  return url && (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== '' ? null : 'expected an http:// or https:// URL';
}

const webhookUrl = z.url({ protocol: /^https?$/ });

function checked(problemOf: (s: string) => string | null) {
  return z.string().superRefine((s, ctx) => {
    const problem = problemOf(s);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  });
}

/** One entry of TRUSTED_PROXIES: an address, or a CIDR block (`prefix` the block's length). */
export interface TrustedProxy {
  /** As written: Fastify's trustProxy takes the entries as text. */
  entry: string;
  address: string;
  family: 'ipv4' | 'ipv6';
  /** Undefined for a single address. */
  prefix?: number;
}

/**
 * TRUSTED_PROXIES (addresses and CIDR blocks separated by commas or spaces), for the relay and the
 * console alike; throws naming the variable and the entry. A malformed entry stops the start: the
 * relay used to drop one silently (its keys' allow_ips then saw the proxy's address for every client
 * behind it) and crash with a RangeError on a prefix too long, while the console refused both.
 */
export function parseTrustedProxies(spec: string): TrustedProxy[] {
  const proxies: TrustedProxy[] = [];
  for (const entry of spec.split(/[,\s]+/).filter(Boolean)) {
    const [address = '', prefix, extra] = entry.split('/');
    const family = isIP(address);
    const bits = family === 4 ? 32 : 128;
    const validPrefix = prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= bits);
    if (family === 0 || !validPrefix || extra !== undefined) throw new Error(`TRUSTED_PROXIES: "${entry}" is not an IP address or CIDR block`);
    proxies.push({ entry, address, family: family === 4 ? 'ipv4' : 'ipv6', ...(prefix !== undefined ? { prefix: Number(prefix) } : {}) });
  }
  return proxies;
}

/**
 * The development secret earlier versions defaulted to: public, so it is refused everywhere. `make`
 * generates a random KEY_SECRET into .data/key-secret; tests and the bench set their own.
 */
export const DEV_KEY_SECRET = 'dev-only-insecure-key-secret-change-me';

/**
 * The variables whose empty value is a documented setting of its own, taken as written (blank
 * included): every other one empty or blank is unset.
 */
const KEEP_EMPTY: ReadonlySet<string> = new Set(['TRUSTED_PROXIES', 'CHANNEL_HEALTH_WEBHOOK_URL', 'CLICKHOUSE_PASSWORD', 'CLICKHOUSE_CLUSTER', 'KEY_SECRET']);

/** Never printed in a refusal: secrets, and a webhook URL, whose path is often its credential. */
const SECRET: ReadonlySet<string> = new Set([
  'KEY_SECRET', 'ROOT_PASSWORD', 'DEMO_PASSWORD', 'ADMIN_PASSWORD', 'CLICKHOUSE_PASSWORD', 'MOCK_UPSTREAM_KEY', 'MOCK_OPENAI_KEY',
  'CHANNEL_HEALTH_WEBHOOK_URL',
]);
/** Printed only when they cannot hold a credential: no user info, no query (ioredis reads ?password=). */
const URLS: ReadonlySet<string> = new Set(['DATABASE_URL', 'REDIS_URL', 'CLICKHOUSE_URL']);

const schema = z.object({
  NODE_ENV: oneOf(['development', 'production', 'test']).default('development'),
  LOG_LEVEL: oneOf(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),

  RELAY_HOST: listenHost.default('127.0.0.1'),
  RELAY_PORT: port.default(3000),
  // uWS listens with SO_REUSEPORT unless told otherwise, so a second relay on a taken port would
  // silently share it: by default the port is taken exclusively and a taken port fails start-up.
  RELAY_REUSE_PORT: bool.default(false),
  // GET /metrics of the relay (Prometheus), apart from the public port; 0 = a free port, off = none.
  RELAY_METRICS_HOST: listenHost.default('127.0.0.1'),
  RELAY_METRICS_PORT: z.union([z.literal('off'), port], { error: 'expected off, or a whole number from 0 to 65535, in decimal digits' }).default(9465),
  CONSOLE_HOST: listenHost.default('127.0.0.1'),
  CONSOLE_PORT: port.default(3001),
  // A console request must have arrived whole (headers and body) this long after it began; past it,
  // 408 and the connection closed (console-api/app.ts).
  CONSOLE_REQUEST_TIMEOUT_MS: ms().default(30_000),
  // How long a console statement waits for a row another transaction holds (Postgres lock_timeout),
  // and how long any console statement may run (statement_timeout); past either the request is 503
  // DATABASE_BUSY, its transaction rolled back whole. 0 = no limit. console-api/db.ts.
  CONSOLE_DB_LOCK_TIMEOUT_MS: ms(0).default(5_000),
  CONSOLE_DB_STATEMENT_TIMEOUT_MS: ms(0).default(30_000),
  // The built web console console-api serves at / (make build writes it); empty = dist/console-web.
  CONSOLE_WEB_DIR: z.string().default(''),
  MOCK_UPSTREAM_PORT: port.default(3090),
  /** The OpenAI-format mock provider (bench/mock-upstream-openai/, `make run`'s channel of type 1). */
  MOCK_OPENAI_PORT: port.default(3093),
  /** The payment sandboxes (bench/payment-sandbox/, `make run`): the demo seed points the payment options at them. */
  EPAY_SANDBOX_PORT: port.default(3091),
  CARDPAY_SANDBOX_PORT: port.default(3092),

  DATABASE_URL: checked(postgresUrlProblem).default('postgres://postgres@127.0.0.1:5432/gateway'),
  PG_POOL_MAX: count().default(10),
  REDIS_URL: checked(redisUrlProblem).default('redis://127.0.0.1:6379/0'),
  // Every Redis key starts with this, so that two stacks (or two test files) can share one server.
  REDIS_PREFIX: z.string().default('gw'),
  // Redis Cluster: seed nodes `host:port,host:port` (or REDIS_URL=redis+cluster://host:port,host:port).
  // Unset: one Redis at REDIS_URL. infra/redis/client.ts, docs/scaling.md.
  REDIS_CLUSTER_NODES: checked(clusterNodesProblem).optional(),
  // Virtual shards accounts are spread over (user id modulo this): each has its own usage stream and
  // deadline set in its accounts' slot. 0 = the unsharded single-Redis layout; unset = 0 on one Redis,
  // 64 on a cluster (which requires > 0). Fixed for the life of the data: changing it orphans mirrors
  // and unbilled stream entries.
  REDIS_SHARDS: whole(0, 16384).optional(),
  // A relay marks a settlement done in its spool only once this many replicas have it (WAIT, one per
  // shard per batch of settlements, on a connection of its own); until then it is replayed, so a
  // failover cannot lose it. Unset = 1 on a cluster, 0 (no WAIT) on one Redis. 0 on a cluster without
  // replicas. docs/scaling.md, "Failover".
  REDIS_SETTLE_WAIT_REPLICAS: count(0).optional(),
  // How long a WAIT waits for the replicas; past it the batch's settlements are replayed later.
  REDIS_SETTLE_WAIT_MS: ms().default(1000),
  // A shard whose replicas confirmed nothing for this long (its replica down or gone) has its
  // settlements confirmed on its master alone, so that the spools stop growing; 0: held until a
  // replica confirms. relay/messages/settlement-confirm.ts.
  REDIS_SETTLE_WAIT_GIVE_UP_MS: ms(0).default(60_000),
  // A billing worker's hold on a shard's stream lasts this long unless renewed (every third of it):
  // a worker that died gives its shards up to the others after at most this.
  BILLING_SHARD_LEASE_MS: ms().default(10_000),
  CLICKHOUSE_URL: checked(httpUrlProblem).default('http://127.0.0.1:8123'),
  CLICKHOUSE_DATABASE: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { error: 'expected a name of letters, digits and _, not starting with a digit' }).default('gateway'),
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
  LOG_RETENTION_DAYS: whole(0, 3650, 'days').default(0),
  // Where the embedded (chdb) ClickHouse keeps its data when no real server answers CLICKHOUSE_URL.
  CLICKHOUSE_LOCAL_PATH: z.string().default('.data/clickhouse'),
  // Statements the embedded ClickHouse runs at once (engine connections; writes still one at a time).
  CLICKHOUSE_LOCAL_CONNECTIONS: count().default(DEFAULT_LOCAL_CONNECTIONS),
  // Its cache of decompressed blocks, which the console's log reads use (0: none).
  CLICKHOUSE_LOCAL_UNCOMPRESSED_CACHE_MB: count(0).default(DEFAULT_LOCAL_UNCOMPRESSED_CACHE_MB),

  // Encrypts stored API keys, channel credentials, secret options and accounts' webhook secrets
  // (AES-256-GCM) and keys the API keys' lookup hash (HMAC-SHA256). No default: the processes that seal,
  // open or look them up (relay, console-api, seed, billing for its notices) refuse to start without it
  // (infra/secrets/api-key-crypto.ts); migrations only to convert redemption codes an earlier version
  // stored in plain text (infra/postgres/migration-steps.ts). Redemption codes are sealed and hashed too.
  KEY_SECRET: checked((s) => s !== '' && s.length < 16 ? 'must be at least 16 characters (make generates 32 random bytes)'
    : s === DEV_KEY_SECRET ? 'is the public development value; generate one: head -c 32 /dev/urandom | base64' : null).default(''),
  KEY_CACHE_TTL_MS: ms().default(1000),
  // Most key records (known and unknown keys) the relay caches; the least recently used go first.
  KEY_CACHE_MAX_ENTRIES: count().default(100_000),
  // While Postgres cannot be reached, a key read within this long past its TTL is still served from
  // the cache (relay/auth/key-directory.ts); 0: every key past its TTL fails with Postgres.
  KEY_CACHE_STALE_MS: ms(0).default(300_000),

  ROOT_USERNAME: z.string().default('root'),
  ROOT_PASSWORD: z.string().min(8, { error: 'must be at least 8 characters' }).optional(),
  // Where a generated root password is written (mode 0600) instead of stdout, whose file is often a
  // log (make run's .run/console-api.log); unset: stdout, once.
  ROOT_PASSWORD_FILE: z.string().optional(),
  SESSION_TTL_SEC: whole(1, TEN_YEARS_SEC, 'seconds').default(7 * 24 * 3600),
  LOGIN_RATE_LIMIT: count().default(5),
  LOGIN_RATE_WINDOW_SEC: sec().default(60),
  // Per client address, whatever the username: password spraying from one address (same window).
  LOGIN_IP_RATE_LIMIT: count().default(30),
  REGISTER_RATE_LIMIT: count().default(10),
  REGISTER_RATE_WINDOW_SEC: sec().default(3600),
  // scrypt runs on libuv's thread pool (4 threads, shared with DNS and fs): at most this many hashes
  // at once, at most PASSWORD_HASH_MAX_WAITING more queued; beyond that the console answers 429.
  PASSWORD_HASH_CONCURRENCY: count().default(2),
  PASSWORD_HASH_MAX_WAITING: count(0).default(32),
  // scrypt's cost for new password hashes, N = 2^this (r 8, p 3): 15 is OWASP's setting (32 MiB,
  // ~0.1-0.3 s of a core per hash). A stored hash carries its own N, so a change leaves existing
  // passwords valid; the tests run at 10, where a login costs milliseconds instead.
  PASSWORD_SCRYPT_LOG2N: whole(10, 20).default(15),
  CHANNEL_TEST_TIMEOUT_MS: ms().default(10_000),
  PAYMENT_PROVIDER_TIMEOUT_MS: ms().default(10_000),
  CARDPAY_WEBHOOK_TOLERANCE_SEC: sec().default(300),

  MAX_BODY_BYTES: count().default(8 * 1024 * 1024),
  // Addresses and CIDR ranges of proxies whose X-Forwarded-For the relay and the console believe
  // (comma-separated; empty: none, the socket's address is the client's).
  TRUSTED_PROXIES: checked((s) => {
    try {
      parseTrustedProxies(s);
      return null;
    } catch (err) {
      return `${(err as Error).message.replace(/^TRUSTED_PROXIES: /, '')}; expected addresses and CIDR blocks separated by commas`;
    }
  }).default(''),
  // The longest the relay waits for one Redis command (a reservation, a settlement): a Redis that stops
  // answering on an open connection would otherwise hold every new request until it returns. A timed
  // out reservation is answered 529 and released; a timed out settlement is tried again.
  RELAY_REDIS_COMMAND_TIMEOUT_MS: ms().default(2000),
  // On SIGTERM the relay stops accepting, and waits this long at most for the exchanges in progress
  // and their settlements before it closes (what is left open is released by the reaper).
  RELAY_SHUTDOWN_GRACE_MS: ms(0).default(30_000),
  // A line a provider's fault repeats for every request (usage above the request's bound, a failure,
  // a refused channel) is logged once per kind and channel in this interval, the next saying how many
  // were held back (infra/log-throttle.ts); 0 = every line.
  RELAY_REPEATED_LOG_INTERVAL_MS: ms(0).default(10_000),
  // Channels tried per request (first one included) on connection errors, 429 and 5xx.
  RELAY_MAX_TRIES: count().default(3),
  // Channel health (relay/routing/channel-health.ts, README "Routing"): a channel is disabled
  // automatically (status 3) after this many channel faults in a row (401/403, credit balance too
  // low), 0 = rule off; or when faults reach this fraction of its attempts over the window, with at
  // least the minimum attempts, 0 = rule off. Each channel may override both (fault_threshold,
  // fault_rate_threshold) or opt out (auto_ban false).
  CHANNEL_FAULTS_TO_DISABLE: count(0).default(5),
  CHANNEL_FAULT_RATE_TO_DISABLE: decimal(0, 1).default(0.5),
  CHANNEL_FAULT_WINDOW_SEC: sec().default(60),
  CHANNEL_FAULT_RATE_MIN_ATTEMPTS: count().default(20),
  // How often a relay reports its channels' successes to Redis (never on the request path).
  CHANNEL_HEALTH_FLUSH_MS: ms().default(1000),
  // A relay sets a channel aside (its picks go to the others first) after this many failures in a row
  // to serve (no connection, no answer in time, 5xx, 529), 0 = never; for
  // the first time, then twice as long after each failure once back, up to the maximum
  // (relay/routing/channel-cooldown.ts).
  CHANNEL_COOLDOWN_FAILURES: count(0).default(3),
  CHANNEL_COOLDOWN_SEC: sec().default(30),
  CHANNEL_COOLDOWN_MAX_SEC: sec().default(300),
  // The console's prober: first probe of an automatically disabled channel this long after it was
  // disabled, then doubling after each failed probe up to the maximum; the scan runs every tick.
  CHANNEL_PROBE_FIRST_SEC: sec().default(30),
  CHANNEL_PROBE_MAX_SEC: sec().default(1800),
  CHANNEL_PROBE_TICK_MS: ms().default(5000),
  // POSTed a JSON notice when a channel is disabled automatically or re-enabled by a probe; empty =
  // none. Same outbound rules as channels (core/net/outbound-guard.ts; ChannelAllowPrivateNetworks).
  CHANNEL_HEALTH_WEBHOOK_URL: checked((s) => s === '' || webhookUrl.safeParse(s).success ? null : 'expected empty, or an http:// or https:// URL').default(''),
  UPSTREAM_CONNECTIONS: count().default(256),
  UPSTREAM_HEADERS_TIMEOUT_MS: ms().default(60_000),
  // A non-streaming answer's headers arrive only once the whole generation is done, so they get a
  // wait as long as the provider's own limit (Anthropic's SDK waits 10 minutes): a shorter one would
  // give up on generations the provider finishes and bills, and they may not be retried elsewhere.
  UPSTREAM_MESSAGE_HEADERS_TIMEOUT_MS: ms().default(600_000),
  UPSTREAM_BODY_TIMEOUT_MS: ms().default(300_000),
  // A reservation no live relay renewed for this long (its relay crashed) is released; relays renew
  // the ones they hold every third of it. See docs/billing.md.
  RESERVATION_TTL_SEC: sec().default(900),
  // Token counting on worker threads (relay/token-count/): threads; bodies above this size are counted
  // for the reservation; safety factor of that count; batch size of delivered-text counting.
  TOKEN_WORKERS: count().default(2),
  COUNT_PROMPT_ABOVE_BYTES: count().default(8192),
  TOKEN_ESTIMATE_FACTOR: decimal(1, 100).default(2),
  DELIVERED_FLUSH_BYTES: count().default(256 * 1024),
  // Prompt counts waiting for a worker beyond those running; past it, 529 overloaded_error.
  TOKEN_QUEUE_MAX: count(0).default(64),
  // count_tokens calls (and prompt counts for a reservation) per API key per minute.
  COUNT_TOKENS_PER_MINUTE: count().default(120),
  // Prompt counts (count_tokens calls and reservation counts) one account, all its keys together, may
  // have queued or running on a relay at once; past it, 429: one account's large counts would
  // otherwise hold the queue for every other account.
  COUNT_TOKENS_IN_FLIGHT_PER_ACCOUNT: count().default(4),
  RESERVATION_REAP_INTERVAL_MS: ms().default(15_000),
  // Where each relay process writes its settlements until Redis took them (one file per process, in a
  // subdirectory per REDIS_PREFIX); a relay started here replays those of relays that died. Keep it on
  // local disk that survives a restart of the relay (relay/messages/settlement-spool.ts).
  RELAY_SPOOL_DIR: z.string().default('.data/relay-spool'),
  // While settlements whose retries gave up are in the spool, the relay replays them this often: a
  // Redis that resumes on the same connection (SIGSTOP/SIGCONT, a network black hole) sends no 'ready'.
  RELAY_SPOOL_REPLAY_INTERVAL_MS: ms().default(5000),
  // How long a settlement may wait to go to Redis with the next reservation, in one write and one
  // script call with the others of that time (core/quota/quota-store.ts, settleSoon): the answer is
  // already on its way and the settlement in the spool, so only the refund of the reservation waits.
  RELAY_SETTLE_DELAY_MS: whole(0, 1000, 'milliseconds').default(2),
  // Credit held by the relay (core/quota/credit-slices.ts): a slice of an account's balance worth this
  // many requests' estimates, reserved from in memory; 0 reserves every request in Redis.
  RELAY_CREDIT_SLICE_REQUESTS: whole(0, 1000).default(16),
  // How long the settlement of a request reserved from a slice may wait to go to Redis with others
  // (RELAY_SETTLE_DELAY_MS for those with a reservation of their own): it refunds nothing anyone waits for.
  RELAY_CREDIT_SLICE_SETTLE_DELAY_MS: whole(0, 1000, 'milliseconds').default(10),
  // A slice's deadline, renewed every third of it: how long a killed relay's slices wait for the reaper.
  RELAY_CREDIT_SLICE_TTL_MS: whole(100, 3_600_000, 'milliseconds').default(15_000),

  // Per process, read when the configuration is: two workers of one host never share a consumer name.
  BILLING_CONSUMER: z.string().default(() => `${hostname()}-${process.pid}`),
  BILLING_BATCH_SIZE: count().default(1000),
  BILLING_BLOCK_MS: ms().default(100),
  BILLING_MIN_BATCH_INTERVAL_MS: ms(0).default(200),
  BILLING_CLAIM_IDLE_MS: ms().default(30_000),
  // The log outbox's own clock (billing/log-outbox.ts): log rows go to ClickHouse every 500 ms in
  // inserts of up to BILLING_LOG_BATCH_SIZE rows, while settlements keep their 200 ms; ClickHouse pays
  // per insert statement (docs/performance.md, issue 17). 0: a pass after every settled batch.
  BILLING_LOG_FLUSH_INTERVAL_MS: ms(0).default(500),
  BILLING_LOG_BATCH_SIZE: count().default(5000),
  // GET /metrics of the billing worker (Prometheus); port 0 = a random free port.
  BILLING_METRICS_HOST: listenHost.default('127.0.0.1'),
  BILLING_METRICS_PORT: port.default(9464),

  // `make run` (and only it: it sets SEED_DEMO=true) seeds a demo account, an admin, a channel to the
  // mock provider and a demo API key. Their passwords have no default: make generates them into .data/.
  SEED_DEMO: bool.default(false),
  DEMO_PASSWORD: z.string().min(8, { error: 'must be at least 8 characters' }).optional(),
  ADMIN_PASSWORD: z.string().min(8, { error: 'must be at least 8 characters' }).optional(),
  /** The credential the mock provider requires and the seeded channel sends. */
  MOCK_UPSTREAM_KEY: z.string().default('sk-ant-mock-local'),
  /** The credential the OpenAI-format mock requires and the seeded OpenAI-format channel sends. */
  MOCK_OPENAI_KEY: z.string().default('sk-proj-mock-local'),
});

export type Config = Readonly<z.infer<typeof schema>>;

/** A variable refused: `value` is what was received (printed only when the variable is no secret). */
export interface ConfigProblem {
  name: string;
  problem: string;
  value?: string;
}

const MAX_SHOWN_CHARS = 100;

function shownValue(name: string, value: string | undefined): string {
  if (value === undefined) return 'unset';
  if (SECRET.has(name)) return 'value not shown (a secret)';
  if (URLS.has(name) && /[@?]/.test(value)) return 'value not shown (it may hold a credential)';
  const text = value.length > MAX_SHOWN_CHARS ? `${value.slice(0, MAX_SHOWN_CHARS)}…` : value;
  return `got ${JSON.stringify(text)}`;
}

/** `NAME: what is allowed; got "value"`: one line per variable, the same from every process. */
export function configProblemLine(p: ConfigProblem): string {
  return `${p.name}: ${p.problem}; ${shownValue(p.name, p.value)}`;
}

/** The configuration refused: every variable at fault, each once. */
export class ConfigError extends Error {
  declare readonly problems: readonly ConfigProblem[];

  constructor(problems: readonly ConfigProblem[]) {
    super(`invalid configuration:\n${problems.map((p) => `  ${configProblemLine(p)}`).join('\n')}`);
    this.name = 'ConfigError';
    // Not enumerable: a logger serializing the error (pino's err) would print the raw values, secrets
    // included; the message has them as configProblemLine shows them.
    Object.defineProperty(this, 'problems', { value: problems, enumerable: false });
  }
}

/** Throws ConfigError naming every variable refused (loadConfigOrExit for an entry point). */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const input: Record<string, string> = {};
  for (const name of Object.keys(schema.shape)) {
    const value = env[name];
    if (value === undefined || (value.trim() === '' && !KEEP_EMPTY.has(name))) continue;
    input[name] = value;
  }
  const parsed = schema.safeParse(input);
  if (!parsed.success) {
    const problems = new Map<string, ConfigProblem>();
    for (const issue of parsed.error.issues) {
      const name = String(issue.path[0]);
      // A variable once, with its first problem: zod may report several checks of one value.
      if (!problems.has(name)) problems.set(name, { name, problem: issue.message, value: input[name] });
    }
    throw new ConfigError([...problems.values()]);
  }
  if (parsed.data.SEED_DEMO && (!parsed.data.DEMO_PASSWORD || !parsed.data.ADMIN_PASSWORD)) {
    throw new ConfigError([{ name: 'SEED_DEMO', problem: 'needs DEMO_PASSWORD and ADMIN_PASSWORD (make run generates both into .data/)', value: input.SEED_DEMO }]);
  }
  return Object.freeze(parsed.data);
}

/**
 * The exit code of a process that stopped on its configuration: EX_CONFIG of sysexits.h. Not 1 (a
 * crash, worth starting again): the local supervisor (infra/launch/supervise.ts) leaves a child that
 * exits with it down at once, as systemd's RestartPreventExitStatus=78 would, since it would only
 * fail the same way again.
 */
export const CONFIG_ERROR_EXIT_CODE = 78;

/** Variables an entry point cannot run without, where the schema lets them be empty for the others. */
export type RequiredVariable = 'KEY_SECRET';

const REQUIRED_HINTS: Readonly<Record<RequiredVariable, string>> = {
  KEY_SECRET: 'is not set: give it 32 random bytes (head -c 32 /dev/urandom | base64); make generates one into .data/key-secret',
};

/**
 * loadConfig for an entry point: a refused configuration is one line per variable on stderr,
 * `<process>: invalid configuration: NAME: …`, and exit CONFIG_ERROR_EXIT_CODE (78), without a stack
 * (it is no bug) and the same from every process whatever its log format.
 */
export function loadConfigOrExit(processName: string, env: Record<string, string | undefined> = process.env, requires: readonly RequiredVariable[] = []): Config {
  try {
    const config = loadConfig(env);
    // Checked here, not when first used: a relay without KEY_SECRET failed its start with a stack
    // (exit 1, started again by the supervisor to fail the same way).
    const missing = requires.filter((name) => config[name] === '');
    if (missing.length > 0) throw new ConfigError(missing.map((name) => ({ name, problem: REQUIRED_HINTS[name] })));
    return config;
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(err.problems.map((p) => `${processName}: invalid configuration: ${configProblemLine(p)}\n`).join(''));
    process.exit(CONFIG_ERROR_EXIT_CODE);
  }
}
