// Billing under load: the money audit after each scenario and the billing lag probe during it.
//
// Audit. After the scenario, wait until the usage stream is drained and no reservation of the bench
// account is open, then compare the movement of four books over the scenario:
//   Postgres   users.quota before − after                      (the account debit)
//   Postgres   Σ ledger.quota of the rows new in the scenario
//   ClickHouse Σ logs.quota FINAL of the account, after − before
//   Redis      accountBalance mirror before − after
// and the formula applied to the usage the mock returned, computed here independently of the relay:
// every row's model is one scenario's (bench/lib/fixtures.ts BENCH_MODELS), whose request body fixes
// its input tokens (countInputTokens) and full output (max_tokens); a row of a complete answer must
// carry exactly that usage, a row of a cut stream at most that output, an error row nothing. The mock
// reports the same cache usage for every request (its cache knobs, read off its answer by
// bench/setup.ts): every row must carry it in its cache columns. Media requests (image and document
// blocks by URL, the mix scenario's bench-mix-image / -document / -media) are charged the input tokens
// the mock adds per block (its media knobs, read off its answers by bench/setup.ts the same way), which
// their expected input_tokens include; the relay reserves the model's context window for them. The
// expected debit is core/pricing's formula, Σ quotaCost: round((input + cache_read × 0.1 +
// cache_write_5m × 1.25 + cache_write_1h × 2 + output × completion_ratio) × model_ratio × group_ratio)
// with the default cache ratios. Both protocols: each row's ledger protocol must be its scenario's
// (`openai` for the chat-completions scenarios, `anthropic` for the rest), and the rows of each are
// counted apart (rows.openai).
import type { ClickHouseClient } from '@clickhouse/client';
import type { Redis } from 'ioredis';
import type { Sql } from '../../infra/postgres/client.js';
import type { RedisKeys } from '../../infra/redis/keys.js';
import { quotaCost, type PriceRatios } from '../../core/pricing/quota-cost.js';
import { FALLBACK_CACHE_READ_RATIO, FALLBACK_CACHE_WRITE_1H_RATIO, FALLBACK_CACHE_WRITE_RATIO, FALLBACK_COMPLETION_RATIO } from '../../core/pricing/ratios.js';
import { BENCH_MODELS } from './fixtures.js';
import { Recorder, type Summary } from './stats.js';

export interface Books {
  pgQuota: number;
  ledgerMaxId: number;
  ledgerSum: number;
  ledgerRows: number;
  chSum: number;
  chRows: number;
  /** What the console's sums and totals read: log_stats_15m (requests counted at insert, never merged away). */
  statsSum: number;
  statsRows: number;
  redisBalance: number | null;
}

export interface ModelExpectation {
  /** Anthropic's input_tokens: neither cache reads nor writes. */
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  /** Every cache write; cacheCreation1hTokens of them for an hour. */
  cacheCreationTokens: number;
  cacheCreation1hTokens: number;
  /** Of inputTokens, what the request's image and document blocks add. */
  mediaTokens?: number;
  /** The protocol the requests come in: the ledger's `protocol` of each row. Absent: anthropic. */
  protocol?: 'anthropic' | 'openai';
}

export interface AuditResult {
  pass: boolean;
  pgDebit: number;
  ledgerSum: number;
  chSum: number;
  /** Σ quota in log_stats_15m over the run: what the console shows. */
  statsSum: number;
  redisMovement: number | null;
  formula: number;
  /** media: the billed rows of requests with images or documents (their charged tokens are in the formula). */
  rows: { ledger: number; clickhouse: number; complete: number; partial: number; error: number; media: number; openai: number };
  problems: string[];
  drainMs: number;
}

/**
 * log_stats_15m against `logs` FINAL over a run (from `before` to `after`): what the console's sums and
 * totals read must count every logged request once. The problem, or null when they agree.
 */
export function statsMismatch(before: Books, after: Books): string | null {
  const statsSum = after.statsSum - before.statsSum;
  const statsRows = after.statsRows - before.statsRows;
  const chSum = after.chSum - before.chSum;
  const chRows = after.chRows - before.chRows;
  return statsSum === chSum && statsRows === chRows ? null : `log_stats_15m ${statsRows} requests, Σ ${statsSum} ≠ logs ${chRows} rows, Σ ${chSum}`;
}

export class Auditor {
  constructor(
    readonly sql: Sql,
    readonly ch: ClickHouseClient,
    readonly redis: Redis,
    readonly keys: RedisKeys,
    readonly userId: number,
  ) {}

  async books(): Promise<Books> {
    const [[u], [l], chRows, statsRows, bal] = await Promise.all([
      this.sql`SELECT quota FROM users WHERE id = ${this.userId}`,
      this.sql`SELECT COALESCE(MAX(id), 0) AS max_id, COALESCE(SUM(quota), 0) AS s, COUNT(*) AS n FROM ledger WHERE user_id = ${this.userId}`,
      this.ch.query({
        query: 'SELECT sum(quota) AS s, count() AS n FROM logs FINAL WHERE user_id = {u:UInt64}',
        query_params: { u: this.userId }, format: 'JSONEachRow',
      }).then((r) => r.json<{ s: string; n: string }>()),
      this.ch.query({
        query: 'SELECT sum(quota) AS s, sum(requests) AS n FROM log_stats_15m WHERE user_id = {u:UInt64}',
        query_params: { u: this.userId }, format: 'JSONEachRow',
      }).then((r) => r.json<{ s: string; n: string }>()),
      this.redis.get(this.keys.accountBalance(this.userId)),
    ]);
    return {
      pgQuota: Number(u!.quota),
      ledgerMaxId: Number(l!.max_id),
      ledgerSum: Number(l!.s),
      ledgerRows: Number(l!.n),
      chSum: Number(chRows[0]?.s ?? 0),
      chRows: Number(chRows[0]?.n ?? 0),
      statsSum: Number(statsRows[0]?.s ?? 0),
      statsRows: Number(statsRows[0]?.n ?? 0),
      redisBalance: bal === null ? null : Number(bal),
    };
  }

  /** The books once everything in flight is settled and billed: the state an audit starts from. */
  async settledBooks(): Promise<Books> {
    await this.drain();
    return this.books();
  }

  /** Until the usage stream is empty, no reservation of the account is open and none of its log rows waits in the outbox. */
  async drain(timeoutMs = 60_000): Promise<number> {
    const t0 = Date.now();
    // The account's shard's stream and deadline set (the only ones in the unsharded layout).
    const shard = this.keys.shardOf(this.userId);
    const stream = this.keys.usageStream(shard);
    const deadlines = this.keys.reservationDeadlines(shard);
    for (;;) {
      // Reservations first, then the stream, then the outbox: a settlement removes its reservation and
      // appends its event in one script, and the billing worker commits the outbox row before it
      // deletes the entry, so each read sees what the one before it missed. The other order saw
      // neither when a settlement landed between the reads, and the audit faked "Redis ≠ Postgres".
      // Every open reservation has its member `<user id>:<request id>` in the deadline set: one key,
      // so this reads the right node of a cluster too (SCAN would read one node).
      let open = 0;
      let cursor = '0';
      do {
        const [next, found] = await this.redis.zscan(deadlines, cursor, 'MATCH', `${this.userId}:*`, 'COUNT', 10_000);
        cursor = next;
        open += found.length / 2;
      } while (cursor !== '0');
      const len = open === 0 ? await this.redis.xlen(stream) : -1;
      if (len === 0) {
        // Acknowledged entries are in Postgres; their log rows reach ClickHouse as the outbox drains.
        const [q] = await this.sql`SELECT COUNT(*)::int AS n FROM log_outbox WHERE (row::jsonb->>'user_id')::bigint = ${this.userId}`;
        open += q!.n as number;
      }
      if (len === 0 && open === 0) return Date.now() - t0;
      if (Date.now() - t0 > timeoutMs) throw new Error(`billing did not drain in ${timeoutMs} ms: ${len} stream entries, ${open} open reservations and queued log rows`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  async audit(before: Books, expectations: Readonly<Record<string, ModelExpectation>>, clientComplete: number, groupRatio = 1): Promise<AuditResult> {
    const drainMs = await this.drain();
    const after = await this.books();
    const rows = await this.sql`
      SELECT model_name, type, quota, prompt_tokens, completion_tokens, cache_read_tokens, cache_write_5m_tokens, cache_write_1h_tokens, protocol FROM ledger
      WHERE user_id = ${this.userId} AND id > ${before.ledgerMaxId}`;
    const problems: string[] = [];
    let formula = 0, complete = 0, partial = 0, error = 0, media = 0, openai = 0;
    for (const r of rows as unknown as Array<{ model_name: string; type: number; quota: number; prompt_tokens: number; completion_tokens: number; cache_read_tokens: number; cache_write_5m_tokens: number; cache_write_1h_tokens: number; protocol: string }>) {
      const exp = expectations[r.model_name];
      const modelRatio = BENCH_MODELS[r.model_name];
      if (!exp || modelRatio === undefined) {
        problems.push(`unexpected model ${r.model_name}`);
        continue;
      }
      if (r.protocol !== (exp.protocol ?? 'anthropic')) problems.push(`${r.model_name}: ledger protocol ${r.protocol}, the requests came in ${exp.protocol ?? 'anthropic'}`);
      if (r.protocol === 'openai') openai++;
      if (r.type === 5) {
        error++;
        if (Number(r.quota) !== 0) problems.push(`error row of ${r.model_name} debited ${r.quota}`);
        continue;
      }
      // prompt_tokens counts the cache tokens too, as new-api's log does.
      const prompt = exp.inputTokens + exp.cacheReadTokens + exp.cacheCreationTokens;
      if (r.prompt_tokens !== prompt) problems.push(`${r.model_name}: prompt_tokens ${r.prompt_tokens}, the mock counted ${prompt}`);
      const cache = [r.cache_read_tokens, r.cache_write_5m_tokens, r.cache_write_1h_tokens];
      const cacheExpected = [exp.cacheReadTokens, exp.cacheCreationTokens - exp.cacheCreation1hTokens, exp.cacheCreation1hTokens];
      if (cache.join() !== cacheExpected.join()) problems.push(`${r.model_name}: cache read / 5m / 1h ${cache.join(' / ')}, the mock reported ${cacheExpected.join(' / ')}`);
      if (exp.mediaTokens) media++;
      if (r.completion_tokens === exp.outputTokens) complete++;
      else if (r.completion_tokens < exp.outputTokens) partial++;
      else problems.push(`${r.model_name}: completion_tokens ${r.completion_tokens} above the ${exp.outputTokens} the mock sends`);
      const price: PriceRatios = {
        model: modelRatio, completion: FALLBACK_COMPLETION_RATIO, group: groupRatio,
        cacheRead: FALLBACK_CACHE_READ_RATIO, cacheWrite: FALLBACK_CACHE_WRITE_RATIO, cacheWrite1h: FALLBACK_CACHE_WRITE_1H_RATIO,
      };
      formula += quotaCost({ ...exp, outputTokens: r.completion_tokens }, price);
    }
    const pgDebit = before.pgQuota - after.pgQuota;
    const ledgerSum = after.ledgerSum - before.ledgerSum;
    const chSum = after.chSum - before.chSum;
    const redisMovement = before.redisBalance === null || after.redisBalance === null ? null : before.redisBalance - after.redisBalance;
    const ledgerRows = after.ledgerRows - before.ledgerRows;
    const chRows = after.chRows - before.chRows;
    if (pgDebit !== ledgerSum) problems.push(`users.quota debit ${pgDebit} ≠ Σ ledger ${ledgerSum}`);
    if (ledgerSum !== chSum) problems.push(`Σ ledger ${ledgerSum} ≠ Σ ClickHouse logs ${chSum}`);
    if (redisMovement !== null && redisMovement !== pgDebit) problems.push(`Redis balance moved ${redisMovement} ≠ Postgres debit ${pgDebit}`);
    if (after.redisBalance !== null && after.redisBalance !== after.pgQuota) problems.push(`Redis mirror ${after.redisBalance} ≠ users.quota ${after.pgQuota} after drain`);
    if (formula !== pgDebit) problems.push(`formula ${formula} ≠ Postgres debit ${pgDebit}`);
    if (ledgerRows !== chRows) problems.push(`${ledgerRows} ledger rows ≠ ${chRows} ClickHouse rows`);
    const stats = statsMismatch(before, after);
    if (stats) problems.push(stats);
    if (complete < clientComplete) problems.push(`${complete} complete rows < ${clientComplete} complete answers the client received`);
    return {
      pass: problems.length === 0,
      pgDebit, ledgerSum, chSum, statsSum: after.statsSum - before.statsSum, redisMovement, formula,
      rows: { ledger: ledgerRows, clickhouse: chRows, complete, partial, error, media, openai },
      problems,
      drainMs,
    };
  }
}

/** Before the oldest checked request's start, the seconds the ClickHouse check also reads (created_at is whole seconds). */
const LAG_PROBE_MARGIN_SEC = 2;

/**
 * Billing lag: request ids captured from responses (x-gateway-request-id) with the time the client saw
 * the response end, until their log row is in ClickHouse. Watched in Postgres, every 100 ms: a row is
 * in ClickHouse once its ledger row exists and its outbox row is gone, because the log outbox deletes
 * a batch's rows in the transaction that commits after ClickHouse took their insert
 * (billing/log-outbox.ts); the figure is later than ClickHouse's own visibility by that delete and
 * commit (a few ms), inside the poll's resolution. Each id found is then looked up in ClickHouse once,
 * at the end: an id Postgres says was sent and ClickHouse lacks counts as missing. Polling ClickHouse
 * itself cost it 5-15 ms of CPU a poll (most of it the embedded engine's fixed cost per statement,
 * docs/performance.md), 10 times a second, on the cores the measured relay runs on; a Postgres poll
 * is two index lookups per id.
 */
export class LagProbe {
  /** request id → [response end, request start], wall-clock ms. */
  readonly #pending = new Map<string, [number, number]>();
  /** Found in Postgres as sent to ClickHouse: request id → request start (bounds the check's read). */
  readonly #sent = new Map<string, number>();
  readonly #rec = new Recorder();
  #timer: NodeJS.Timeout | undefined;
  #busy = false;
  queries = 0;
  queryMs = new Recorder();

  constructor(readonly ch: ClickHouseClient, readonly sql: Sql, readonly userId: number, readonly intervalMs = 100) {}

  add(requestId: string, endMs: number, startMs = endMs): void {
    this.#pending.set(requestId, [endMs, Math.min(startMs, endMs)]);
  }

  start(): void {
    this.#timer = setInterval(() => void this.#poll(), this.intervalMs);
  }

  async #poll(): Promise<void> {
    if (this.#busy || this.#pending.size === 0) return;
    this.#busy = true;
    try {
      const ids = [...this.#pending.keys()].slice(0, 500);
      const t0 = performance.now();
      const rows = await this.sql<{ request_id: string }[]>`
        SELECT l.request_id FROM ledger l
        WHERE l.request_id = ANY(${ids}::text[]) AND NOT EXISTS (SELECT 1 FROM log_outbox o WHERE o.id = l.id)`;
      const now = Date.now();
      this.queries++;
      this.queryMs.record(performance.now() - t0);
      for (const { request_id } of rows) {
        const times = this.#pending.get(request_id);
        if (times === undefined) continue;
        this.#rec.record(Math.max(0, now - times[0]));
        this.#pending.delete(request_id);
        this.#sent.set(request_id, times[1]);
      }
    } catch {
      // next poll
    } finally {
      this.#busy = false;
    }
  }

  /** Polls until every captured id is found (or the timeout), stops, and checks the found ones in ClickHouse. */
  async finish(timeoutMs = 30_000): Promise<{ lagMs: Summary; missing: number; pollQueryMs: Summary }> {
    const end = Date.now() + timeoutMs;
    while (this.#pending.size > 0 && Date.now() < end) await new Promise((r) => setTimeout(r, this.intervalMs));
    clearInterval(this.#timer);
    while (this.#busy) await new Promise((r) => setTimeout(r, 10));
    let missing = this.#pending.size;
    const sent = [...this.#sent];
    // Query parameters travel in the URL: a few hundred ids per query keep it under the server's limit.
    for (let i = 0; i < sent.length; i += 200) {
      const chunk = sent.slice(i, i + 200);
      const since = Math.max(0, Math.floor(Math.min(...chunk.map(([, startMs]) => startMs)) / 1000) - LAG_PROBE_MARGIN_SEC);
      const found = await this.ch.query({
        query: `SELECT DISTINCT request_id FROM logs
                WHERE user_id = {u:UInt64} AND created_at >= toDateTime({since:UInt32}) AND request_id IN {ids:Array(String)}`,
        query_params: { u: this.userId, since, ids: chunk.map(([id]) => id) }, format: 'JSONEachRow',
      }).then((r) => r.json<{ request_id: string }>());
      missing += chunk.length - found.length;
    }
    return { lagMs: this.#rec.summary(), missing, pollQueryMs: this.queryMs.summary() };
  }
}
