// Dead letters: usage events the billing worker could not decode (billing-worker.ts moves them to
// keys.usageDeadLetterStream(), with their source entry id, instead of blocking the group). A relay
// event there has already moved the Redis mirror but not Postgres nor the log, so it must not sit
// unseen: the worker exports its count as gateway_billing_dead_letters, and this command moves the
// entries that decode now (typically after upgrading a worker older than the relay that wrote them)
// back to the usage stream, where they are billed like any other event. Replaying is idempotent:
// ledger.request_id is UNIQUE, so an event billed already (or replayed twice) moves no money again
// and its log row collapses. Entries that still do not decode stay, and are listed.
//
//   node dist/billing/replay-dead-letters.js     (make replay-dead-letters)
import type { Redis } from 'ioredis';
import type { Logger } from '../infra/logger.js';
import { Gauge } from '../core/metrics/prom.js';
import { decodeUsageEvent, encodedUsageEventsOf } from '../core/usage/usage-event.js';
import { billingMetrics, type BillingMetrics } from './metrics/billing-metrics.js';
import { startPeriodicJob } from './periodic-job.js';
import { retryOnMoved } from '../infra/redis/client.js';

const PAGE = 500;
/** The field billing-worker.ts puts first on a dead letter: the id the entry had in the usage stream. */
const SOURCE_ID = 'source_id';

export interface DeadLetterStreams {
  /** keys.usageStream() */
  stream: string;
  /** keys.usageDeadLetterStream() */
  deadLetterStream: string;
}

export interface ReplayReport {
  replayed: number;
  /** Entries left in the dead-letter stream because they still do not decode. */
  kept: { id: string; sourceId: string | null; error: string }[];
}

export async function replayDeadLetters(redis: Redis, s: DeadLetterStreams): Promise<ReplayReport> {
  const report: ReplayReport = { replayed: 0, kept: [] };
  let from = '-';
  for (;;) {
    const page = (await redis.xrange(s.deadLetterStream, from, '+', 'COUNT', PAGE)) as [string, string[]][];
    for (const [id, fields] of page) {
      const original: string[] = [];
      let sourceId: string | null = null;
      for (let i = 0; i + 1 < fields.length; i += 2) {
        if (fields[i] === SOURCE_ID) sourceId = fields[i + 1]!;
        else original.push(fields[i]!, fields[i + 1]!);
      }
      try {
        // Several events when a worker from before the settlement scripts joined them dead-lettered
        // the relay's entry whole: replayed whole, the worker splits it again.
        const texts = encodedUsageEventsOf(original);
        if (texts === undefined) throw new Error('entry has no event field');
        for (const text of texts) decodeUsageEvent(text);
      } catch (err) {
        report.kept.push({ id, sourceId, error: String((err as Error).message ?? err).slice(0, 300) });
        continue;
      }
      // One transaction: an interrupted replay leaves each entry in exactly one of the two streams.
      await redis.multi().xadd(s.stream, '*', ...original).xdel(s.deadLetterStream, id).exec();
      report.replayed++;
    }
    if (page.length < PAGE) return report;
    from = `(${page[page.length - 1]![0]}`;
  }
}

// One per registry: a process that starts billing twice (the test harness restarts it) must not
// expose the family twice.
const gauges = new WeakMap<BillingMetrics, Gauge>();

/** Registers gateway_billing_dead_letters on the worker's metrics; refresh() reads XLEN into it. */
export function deadLetterGauge(redis: Redis, deadLetterStream: string | string[], metrics: BillingMetrics = billingMetrics): { gauge: Gauge; refresh(): Promise<void> } {
  let gauge = gauges.get(metrics);
  if (!gauge) {
    gauge = metrics.registry.register(new Gauge('gateway_billing_dead_letters',
      'Usage events in the dead-letter stream (XLEN): money moved in Redis, not yet in Postgres. Replay: make replay-dead-letters.'));
    gauges.set(metrics, gauge);
  }
  const g = gauge;
  // Sharded layout: one dead-letter stream per shard, summed.
  const streams = Array.isArray(deadLetterStream) ? deadLetterStream : [deadLetterStream];
  // One tick's XLENs go to a node as one batch, which ioredis does not redirect when its MOVEDs name
  // several slots (infra/redis/client.ts): each is sent again once the slot table follows its MOVED.
  return { gauge: g, refresh: async () => g.set((await Promise.all(streams.map((d) => retryOnMoved(redis, () => redis.xlen(d))))).reduce((a, b) => a + b, 0)) };
}

export function startDeadLetterGauge(redis: Redis, deadLetterStream: string | string[], intervalMs: number, log: Logger): { stop(): void } {
  const g = deadLetterGauge(redis, deadLetterStream);
  void g.refresh().catch(() => undefined);
  return startPeriodicJob('dead-letter gauge', intervalMs, log, g.refresh);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { loadConfigOrExit } = await import('../infra/config.js');
  const { createRedis, redisKeysFor } = await import('../infra/redis/client.js');
  const config = loadConfigOrExit('replay-dead-letters');
  const keys = redisKeysFor(config);
  const redis = createRedis(config, 'replay-dead-letters');
  try {
    // Each shard's dead letters go back to that shard's stream (the same slot: one MULTI).
    const report: ReplayReport = { replayed: 0, kept: [] };
    for (let shard = 0; shard < keys.streamShards; shard++) {
      const r = await replayDeadLetters(redis, { stream: keys.usageStream(shard), deadLetterStream: keys.usageDeadLetterStream(shard) });
      report.replayed += r.replayed;
      report.kept.push(...r.kept);
    }
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
    process.exitCode = report.kept.length ? 2 : 0;
  } finally {
    redis.disconnect();
  }
}
