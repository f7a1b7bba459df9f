// Redis holds money between the relay's settlement and the billing worker's Postgres commit: the
// usage stream entries not yet billed, and the balance mirror's debits they carry. A Redis that
// restarts without them serves those requests free. The project's own Redis runs with AOF
// (infra/scripts/ensure-services.sh); an existing one is checked here at start-up and a missing
// persistence is logged loudly, never fatal: refusing to start would stop a gateway that was running
// the same way yesterday, and an operator may accept the risk (docs/billing.md, "What a failure loses").
import type { Logger } from 'pino';
import type { Redis } from './client.js';

export interface RedisPersistence {
  /** AOF on; null when neither CONFIG nor INFO answered. */
  aof: boolean | null;
  /** `always` | `everysec` | `no`, when CONFIG answered and AOF is on. */
  appendfsync: string | null;
  /** RDB `save` rules ('' = none), when CONFIG answered. */
  save: string | null;
  source: 'config' | 'info' | 'unknown';
}

const AT_RISK = 'a Redis restart or crash loses the usage stream entries not yet billed (requests answered and not yet in ' +
  'Postgres are then served free) and the reservations in flight; the billing consumer group is recreated, the ' +
  'balance mirror refilled from Postgres';

/** Reads the persistence settings of `redis` and warns when a restart would lose money. Never throws. */
export async function checkRedisPersistence(redis: Redis, log: Logger, service: string): Promise<RedisPersistence> {
  const state = await readPersistence(redis);
  const fix = 'run Redis with --appendonly yes --appendfsync everysec (at most ~1 s of writes lost on a machine crash)';
  if (state.aof === null) {
    log.warn({ service, atRisk: AT_RISK, fix }, 'Redis persistence unknown: CONFIG GET and INFO persistence both failed');
  } else if (!state.aof) {
    const rdb = state.save ? ` (RDB snapshots only, "save ${state.save}": everything since the last snapshot)` : '';
    log.warn({ service, ...state, atRisk: AT_RISK + rdb, fix }, 'Redis persistence is off (appendonly no): money in flight is lost on a Redis restart');
  } else if (state.appendfsync === 'no') {
    log.warn({ service, ...state, atRisk: 'on a machine crash, the writes the OS had not flushed yet (typically up to 30 s)', fix }, 'Redis AOF is on but appendfsync is no');
  } else {
    log.info({ service, ...state }, 'Redis persistence: AOF on');
  }
  return state;
}

async function readPersistence(redis: Redis): Promise<RedisPersistence> {
  try {
    const flat = (await redis.config('GET', 'appendonly', 'appendfsync', 'save')) as string[];
    const v = new Map<string, string>();
    for (let i = 0; i + 1 < flat.length; i += 2) v.set(flat[i]!, flat[i + 1]!);
    if (v.has('appendonly')) {
      const aof = v.get('appendonly') === 'yes';
      return { aof, appendfsync: aof ? v.get('appendfsync') ?? null : null, save: v.get('save') ?? null, source: 'config' };
    }
  } catch {
    // CONFIG is often disabled or renamed on managed Redis: INFO still says whether AOF is on.
  }
  try {
    const m = /^aof_enabled:(\d)/m.exec(await redis.info('persistence'));
    if (m) return { aof: m[1] === '1', appendfsync: null, save: null, source: 'info' };
  } catch {
    // reported as unknown
  }
  return { aof: null, appendfsync: null, save: null, source: 'unknown' };
}
