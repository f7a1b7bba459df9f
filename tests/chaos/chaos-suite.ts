// The chaos suite (issue 15): one fault after another on a stack of its own (chaos-stack.ts) under a
// load of streaming and non-streaming requests through the official SDK (load.ts), slow enough that
// requests are in flight when each fault strikes. After each fault, once billing has drained:
//   - the money audit: Postgres debit = Σ ledger = Σ ClickHouse logs = Redis mirror movement = the
//     price formula (core/pricing quotaCost) over the usage the mock returned, row by row;
//   - every request the client saw answered has its ledger row and exactly one log row (lost,
//     duplicated);
//   - no balance below zero, the mirror equal to users.quota;
//   - recovery: seconds from the fault's end until a probe request is answered and its log row is in
//     ClickHouse within 1 s of the answer (billing lag back under 1 s).
// Durations are the issue's times CHAOS_SCALE (1: `make chaos`; the `make test` version runs a tenth).
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { quotaCost, type PriceRatios } from '../../core/pricing/quota-cost.js';
import { FALLBACK_CACHE_READ_RATIO, FALLBACK_CACHE_WRITE_1H_RATIO, FALLBACK_CACHE_WRITE_RATIO, FALLBACK_COMPLETION_RATIO } from '../../core/pricing/ratios.js';
import { Auditor, statsMismatch, type Books } from '../../bench/lib/audit.js';
import { BENCH_MODELS } from '../../bench/lib/fixtures.js';
import { expectationsFor } from '../../bench/scenarios.js';
import { MOCK_CACHE, startChaosStack, type ChaosStack } from './chaos-stack.js';
import { Load, type LoadFigures } from './load.js';

export interface ChaosOptions {
  /** Fault durations are the issue's times this. */
  scale: number;
  redisPort: number;
  concurrency: number;
  /** Only the faults whose name contains one of these (all when empty). */
  only?: readonly string[];
  outDir: string;
  log: (line: string) => void;
}

export interface FaultRow {
  fault: string;
  /** Requests sent while the fault's phase ran, and answered in full. */
  requests: number;
  answered: number;
  lost: number;
  duplicated: number;
  recoverySec: number;
  pgDebit: number;
  problems: string[];
}

interface Fault {
  name: string;
  /** Injects the fault, lasts it out, and clears it; resolves when cleared (the recovery clock starts). */
  run(s: ChaosStack): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function faults(scale: number): Fault[] {
  const sec = (s: number) => Math.max(500, Math.round(s * 1000 * scale));
  return [
    {
      name: 'relay kill -9, restart',
      run: async (s) => {
        await s.relay.stop('SIGKILL');
        await s.relay.start();
      },
    },
    {
      name: 'billing kill -9, restart',
      run: async (s) => {
        await s.billing.stop('SIGKILL');
        await s.billing.start();
      },
    },
    {
      name: `Redis kill -9, down ${sec(30) / 1000} s, relay kill -9 midway`,
      run: async (s) => {
        const t0 = Date.now();
        await s.redisServer.kill();
        await sleep(sec(30) / 2);
        await s.relay.stop('SIGKILL');
        await s.relay.start();
        await sleep(Math.max(0, sec(30) - (Date.now() - t0)));
        await s.redisServer.start();
      },
    },
    {
      name: `Redis SIGSTOP ${sec(15) / 1000} s`,
      run: async (s) => {
        s.redisServer.pause();
        await sleep(sec(15));
        s.redisServer.resume();
      },
    },
    {
      name: `ClickHouse stopped ${sec(60) / 1000} s`,
      run: async (s) => {
        // SIGTERM first (the embedded server closes kept-alive connections and stops within 3 s); SIGKILL
        // after 5 s only as a backstop.
        await s.clickhouse.stop('SIGTERM', 5000);
        await sleep(sec(60));
        await s.clickhouse.start(120_000);
      },
    },
    {
      name: `Postgres unreachable ${sec(30) / 1000} s`,
      run: async (s) => {
        s.postgresProxy.cut();
        await sleep(sec(30));
        s.postgresProxy.restore();
      },
    },
    {
      name: 'relay SIGTERM under load, restart',
      run: async (s) => {
        await s.relay.stop('SIGTERM');
        if (s.relay.exitCode !== 0) throw new Error(`relay exited ${s.relay.exitCode} on SIGTERM`);
        await s.relay.start();
      },
    },
  ];
}

/**
 * Until nothing of the account is in flight: no open reservation nor hold, then an empty usage stream, then
 * no queued log row, read in that order. A settlement removes its reservation and appends its event
 * in one script, so an empty stream read after no reservation was seen means every settlement made
 * so far is billed. (Reading the stream first would miss a settlement landing between the two reads;
 * bench's Auditor.drain reads in the same order.)
 */
async function settled(s: ChaosStack, timeoutMs = 180_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    let open = 0;
    for (const userId of [s.fixtures.userId, s.small.userId]) {
      let cursor = '0';
      do {
        const [next, found] = await s.redis.scan(cursor, 'MATCH', s.keys.reservation(userId, '*'), 'COUNT', 10_000);
        cursor = next;
        open += found.length;
      } while (cursor !== '0');
      // And what the deadline set still holds for it: a reaped credit slice's hold (its member
      // `<user>:<slice>~held`; its tombstone is no reservation hash) until its relay returns it or
      // the reaper, RESERVATION_TTL_SEC after the reap.
      do {
        const [next, found] = await s.redis.zscan(s.keys.reservationDeadlines(), cursor, 'MATCH', `${userId}:*`, 'COUNT', 10_000);
        cursor = next;
        open += found.length / 2;
      } while (cursor !== '0');
    }
    if (open === 0 && (await s.redis.xlen(s.keys.usageStream())) === 0) {
      const [q] = await s.sql`SELECT count(*)::int AS n FROM log_outbox`;
      if (q!.n === 0) return;
    }
    if (Date.now() > end) throw new Error(`billing did not drain in ${timeoutMs} ms`);
    await sleep(50);
  }
}

/** After a fault that failed half-way: every part running and reachable again, for the next fault. */
async function heal(s: ChaosStack): Promise<void> {
  s.redisServer.resume();
  if (!s.redisServer.running) await s.redisServer.start();
  s.postgresProxy.restore();
  for (const svc of [s.clickhouse, s.billing, s.relay]) if (!svc.running) await svc.start(120_000);
}

const PRICE = (model: string): PriceRatios => ({
  model: BENCH_MODELS[model] ?? NaN, completion: FALLBACK_COMPLETION_RATIO, group: 1,
  cacheRead: FALLBACK_CACHE_READ_RATIO, cacheWrite: FALLBACK_CACHE_WRITE_RATIO, cacheWrite1h: FALLBACK_CACHE_WRITE_1H_RATIO,
});

/** Seconds from now until a probe's log row reaches ClickHouse within 1 s of its answer. */
async function recovery(s: ChaosStack, load: Load, timeoutMs: number): Promise<number> {
  const t0 = Date.now();
  let last = 'no probe yet';
  while (Date.now() - t0 < timeoutMs) {
    const id = await load.once();
    const answeredAt = Date.now();
    last = id ? `probe ${id} answered, its log row not in ClickHouse within 1 s` : 'probe not answered';
    if (id) {
      while (Date.now() - answeredAt < 1000) {
        const rs = await s.ch.query({ query: 'SELECT count() AS n FROM logs WHERE request_id = {id:String}', query_params: { id }, format: 'JSONEachRow' })
          .then((r) => r.json<{ n: string }>()).catch((err: unknown) => { last = `ClickHouse query failed: ${(err as Error).message}`; return [{ n: '0' }]; });
        if (Number(rs[0]?.n) > 0) return (Date.now() - t0) / 1000;
        await sleep(25);
      }
    } else {
      await sleep(200);
    }
  }
  throw new Error(`billing lag not back under 1 s within ${timeoutMs} ms (last: ${last})`);
}

async function audit(s: ChaosStack, auditor: Auditor, before: Books, figures: LoadFigures, smallFigures: LoadFigures): Promise<Omit<FaultRow, 'fault' | 'recoverySec'>> {
  const problems: string[] = [];
  await settled(s);
  const after = await auditor.books();
  const expectations = expectationsFor(1_000_000, MOCK_CACHE, { image: 0, document: 0 });
  const rows = await s.sql<{ request_id: string; model_name: string; type: number; quota: string; prompt_tokens: number; completion_tokens: number }[]>`
    SELECT request_id, model_name, type, quota, prompt_tokens, completion_tokens FROM ledger
    WHERE user_id = ${s.fixtures.userId} AND id > ${before.ledgerMaxId}`;
  let formula = 0;
  for (const r of rows) {
    if (r.type === 5) {
      if (Number(r.quota) !== 0) problems.push(`error row ${r.request_id} debited ${r.quota}`);
      continue;
    }
    const exp = expectations[r.model_name];
    if (!exp || BENCH_MODELS[r.model_name] === undefined) {
      problems.push(`row ${r.request_id}: unexpected model ${r.model_name}`);
      continue;
    }
    const prompt = exp.inputTokens + exp.cacheReadTokens + exp.cacheCreationTokens;
    if (r.prompt_tokens !== prompt) problems.push(`row ${r.request_id}: prompt_tokens ${r.prompt_tokens}, the mock counted ${prompt}`);
    if (r.completion_tokens > exp.outputTokens) problems.push(`row ${r.request_id}: completion_tokens ${r.completion_tokens} above the ${exp.outputTokens} the mock sends`);
    formula += quotaCost({ ...exp, outputTokens: r.completion_tokens }, PRICE(r.model_name));
  }
  const pgDebit = before.pgQuota - after.pgQuota;
  const ledgerSum = after.ledgerSum - before.ledgerSum;
  const chSum = after.chSum - before.chSum;
  if (pgDebit !== ledgerSum) problems.push(`users.quota debit ${pgDebit} ≠ Σ ledger ${ledgerSum}`);
  if (ledgerSum !== chSum) problems.push(`Σ ledger ${ledgerSum} ≠ Σ ClickHouse logs ${chSum}`);
  if (after.ledgerRows - before.ledgerRows !== after.chRows - before.chRows) problems.push(`${after.ledgerRows - before.ledgerRows} ledger rows ≠ ${after.chRows - before.chRows} ClickHouse rows`);
  const stats = statsMismatch(before, after);
  if (stats) problems.push(stats);
  if (before.redisBalance === null || after.redisBalance === null) problems.push('the Redis mirror was not loaded');
  else {
    if (before.redisBalance - after.redisBalance !== pgDebit) problems.push(`Redis mirror moved ${before.redisBalance - after.redisBalance} ≠ Postgres debit ${pgDebit}`);
    if (after.redisBalance !== after.pgQuota) problems.push(`Redis mirror ${after.redisBalance} ≠ users.quota ${after.pgQuota}`);
    if (after.redisBalance < 0) problems.push(`Redis mirror below zero: ${after.redisBalance}`);
  }
  if (formula !== pgDebit) problems.push(`formula over the mock's usage ${formula} ≠ Postgres debit ${pgDebit}`);
  const [negative] = await s.sql`SELECT count(*)::int AS n FROM users WHERE quota < 0`;
  if (negative!.n) problems.push(`${negative!.n} balances below zero`);
  // The account run dry: never below zero, its mirror equal to its book.
  const [small] = await s.sql`SELECT quota FROM users WHERE id = ${s.small.userId}`;
  const smallMirror = await s.redis.get(s.keys.accountBalance(s.small.userId));
  if (smallMirror !== null && Number(smallMirror) !== Number(small!.quota)) problems.push(`small account: mirror ${smallMirror} ≠ users.quota ${small!.quota}`);
  if (Number(small!.quota) < 0 || Number(smallMirror ?? 0) < 0) problems.push(`small account below zero: ${small!.quota} (mirror ${smallMirror})`);

  // Every answer the clients saw: one ledger row, one log row.
  const answered = [...figures.answered, ...smallFigures.answered];
  const ids = answered.map((a) => a.requestId);
  if (ids.some((id) => !id)) problems.push('an answer without x-gateway-request-id');
  const byId = new Map(answered.map((a) => [a.requestId, a]));
  let duplicated = ids.length - byId.size;
  const ledgerRows = await s.sql<{ request_id: string; completion_tokens: number }[]>`
    SELECT request_id, completion_tokens FROM ledger WHERE request_id = ANY(${ids}::text[]) AND type = 2`;
  const inLedger = new Set(ledgerRows.map((r) => r.request_id));
  for (const r of ledgerRows) {
    const a = byId.get(r.request_id)!;
    if (r.completion_tokens !== a.outputTokens) problems.push(`${r.request_id}: billed ${r.completion_tokens} output tokens, the client got ${a.outputTokens}`);
  }
  const logCounts = new Map<string, number>();
  // Query parameters travel in the URL: a few hundred ids per query keep it under the server's limit.
  for (let i = 0; i < ids.length; i += 200) {
    const rs = await s.ch.query({
      query: 'SELECT request_id, count() AS n FROM logs FINAL WHERE user_id IN {u:Array(UInt64)} AND request_id IN {ids:Array(String)} GROUP BY request_id',
      query_params: { u: [s.fixtures.userId, s.small.userId], ids: ids.slice(i, i + 200) }, format: 'JSONEachRow',
    }).then((r) => r.json<{ request_id: string; n: string }>());
    for (const r of rs) logCounts.set(r.request_id, Number(r.n));
  }
  let lost = 0;
  for (const id of byId.keys()) {
    const n = logCounts.get(id) ?? 0;
    if (!inLedger.has(id) || n === 0) lost++;
    if (n > 1) duplicated++;
  }
  if (lost) problems.push(`${lost} answered requests not billed or not logged`);
  if (duplicated) problems.push(`${duplicated} answered requests logged more than once`);
  return { requests: figures.sent + smallFigures.sent, answered: byId.size, lost, duplicated, pgDebit, problems };
}

export function reportTable(rows: readonly FaultRow[]): string {
  const lines = [
    '| fault | requests | answered | lost | duplicated | recovery s | debit | audit |',
    '|---|---:|---:|---:|---:|---:|---:|---|',
    ...rows.map((r) => `| ${r.fault} | ${r.requests} | ${r.answered} | ${r.lost} | ${r.duplicated} | ${r.recoverySec.toFixed(1)} | ${r.pgDebit} | ${r.problems.length ? `FAIL: ${r.problems.slice(0, 3).join('; ')}` : 'PASS'} |`),
  ];
  return lines.join('\n');
}

export async function runChaosSuite(o: ChaosOptions): Promise<FaultRow[]> {
  mkdirSync(o.outDir, { recursive: true });
  // Streams of 64 tokens last ~1.3 s: a fault always finds some in flight.
  const s = await startChaosStack({ redisPort: o.redisPort, tokenDelayMs: 20, outDir: o.outDir, log: o.log });
  const rows: FaultRow[] = [];
  try {
    const auditor = new Auditor(s.sql, s.ch, s.redis, s.keys, s.fixtures.userId);
    const warmup = new Load(s.relayUrl, s.fixtures.apiKey, 1);
    if (!(await warmup.once())) throw new Error('the relay does not answer the chaos key');
    const settleMs = Math.max(1000, 3000 * o.scale);
    const chosen = faults(o.scale).filter((f) => !o.only?.length || o.only.some((w) => f.name.includes(w)));
    for (const fault of chosen) {
      o.log(`fault: ${fault.name}`);
      await settled(s);
      const before = await auditor.books();
      const load = new Load(s.relayUrl, s.fixtures.apiKey, o.concurrency);
      const smallLoad = new Load(s.relayUrl, s.small.apiKey, 1);
      load.start();
      smallLoad.start();
      await sleep(settleMs);
      let recoverySec = NaN;
      const problems: string[] = [];
      try {
        const t0 = Date.now();
        await fault.run(s);
        o.log(`  injected and cleared in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
        recoverySec = await recovery(s, load, 180_000);
      } catch (err) {
        problems.push(`fault or recovery failed: ${(err as Error).message}`);
        await heal(s).catch((e: unknown) => problems.push(`the stack could not be restored: ${(e as Error).message}`));
      }
      await sleep(settleMs);
      await Promise.all([load.stop(), smallLoad.stop()]);
      const row: FaultRow = { fault: fault.name, recoverySec, ...(await audit(s, auditor, before, load.figures, smallLoad.figures).catch((err: unknown) => ({ requests: load.figures.sent, answered: load.figures.answered.length, lost: NaN, duplicated: NaN, pgDebit: NaN, problems: [`audit failed: ${(err as Error).message}`] }))) };
      row.problems.unshift(...problems);
      const failed = [...load.figures.failed].map(([k, n]) => `${k}×${n}`).join(' ');
      const smallFailed = [...smallLoad.figures.failed].map(([k, n]) => `${k}×${n}`).join(' ');
      o.log(`  ${row.requests} sent, ${row.answered} answered (refused or failed: ${failed || 'none'}; small account ${smallLoad.figures.answered.length} answered, ${smallFailed || 'none'} refused or failed), lost ${row.lost}, duplicated ${row.duplicated}, recovery ${recoverySec.toFixed(1)} s${row.problems.length ? `; PROBLEMS: ${row.problems.join('; ')}` : ''}`);
      rows.push(row);
    }
  } finally {
    const table = reportTable(rows);
    o.log(`\n${table}\n`);
    writeFileSync(join(o.outDir, 'report.md'), `# Chaos suite, scale ${o.scale}\n\n${table}\n`);
    writeFileSync(join(o.outDir, 'report.json'), JSON.stringify({ scale: o.scale, rows }, null, 2));
    await s.close();
  }
  return rows;
}
