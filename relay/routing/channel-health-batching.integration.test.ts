// ChannelHealth against a real Redis (Postgres stood in by a recorder, since only the disabling
// writes there): successes cost no Redis call until the flush, a flushed success breaks a run of
// faults, the threshold trips once and is announced, and auto_ban false never trips.
import { afterAll, describe, expect, it } from 'vitest';
import { Registry } from '../../core/metrics/prom.js';
import { createLogger } from '../../infra/logger.js';
import type { Sql } from '../../infra/postgres/client.js';
import { createRedis } from '../../infra/redis/client.js';
import { redisKeys } from '../../infra/redis/keys.js';
import { testConfig } from '../../infra/testing/test-config.js';
import { ChannelMetrics } from '../metrics/channel-metrics.js';
import { ChannelHealth } from './channel-health.js';
import type { Channel } from './channel-registry.js';

const config = testConfig();
const redis = createRedis(config, 'channel-health-test');
const keys = redisKeys(config.REDIS_PREFIX);

afterAll(async () => {
  const found = await redis.keys(`${config.REDIS_PREFIX}:*`);
  if (found.length) await redis.del(...found);
  await redis.quit();
});

/** A Postgres stand-in: records the statements the disabling runs, answers the channel's row. */
function recordingSql(statements: string[]): Sql {
  const tx = (strings: TemplateStringsArray) => {
    statements.push(strings.join('?').replace(/\s+/g, ' ').trim());
    return Promise.resolve([{ id: 1, name: 'c' }]);
  };
  return { begin: async (fn: (t: typeof tx) => unknown) => fn(tx) } as unknown as Sql;
}

let nextId = 500;
function channel(autoBan = true): Channel {
  return {
    id: nextId++, name: 'c', type: 14, baseUrl: 'http://x', apiKey: 'k', modelMapping: null, seed: 1, flexRatio: 1, openAiApi: false,
    health: { autoBan, faultThreshold: null, faultRateThreshold: null, epochMs: 0 },
  };
}

function health(statements: string[], announced: number[], now: () => number) {
  return new ChannelHealth({
    redis, keys, sql: recordingSql(statements), log: createLogger(config, 'test'), metrics: new ChannelMetrics(new Registry()),
    settings: { faultsToDisable: 3, faultRateToDisable: 0, windowMs: 60_000, minAttempts: 10, flushMs: 60_000, firstProbeSec: 30 },
    announce: async (id) => void announced.push(id), now,
  });
}

describe('ChannelHealth', () => {
  it('counts successes locally until the flush, and a flushed success breaks the run of faults', async () => {
    const statements: string[] = [];
    const announced: number[] = [];
    let t = 1_800_000_000_000;
    const h = health(statements, announced, () => t);
    const c = channel();
    await h.faulted(c, 'r1', 'provider answered HTTP 401');
    await h.faulted(c, 'r2', 'provider answered HTTP 401');
    t += 10;
    for (let i = 0; i < 5; i++) h.succeeded(c);
    expect(await redis.hget(keys.channelOutcomes(c.id), 'last_ok')).toBeNull();
    t += 10;
    await h.flush();
    expect(await redis.hget(keys.channelOutcomes(c.id), 'last_ok')).toBe(String(t - 10));
    expect(await redis.hget(keys.channelOutcomes(c.id), `r${Math.floor(t / 10_000)}`)).toBe('7');
    // The two faults before the success no longer count: two more do not trip, a third does.
    t += 10;
    await h.faulted(c, 'r3', 'provider answered HTTP 401');
    await h.faulted(c, 'r4', 'provider answered HTTP 401');
    expect(announced).toEqual([]);
    await h.faulted(c, 'r5', 'provider answered HTTP 403');
    expect(announced).toEqual([c.id]);
    expect(statements[0]).toContain('UPDATE channels SET status =');
    expect(statements[1]).toContain('UPDATE abilities SET enabled = false');
    await h.stop();
  });

  // Review routing: left to the flush, a channel answering ok, 403, ok, 403… within one flush
  // interval was disabled for "5 consecutive channel faults", and 20 faults among 100 attempts for a
  // rate of 20 in 20.
  it('a fault carries this relay\'s successes not yet reported, scored before it: alternating with successes, faults never run on', async () => {
    const statements: string[] = [];
    const announced: number[] = [];
    let t = 1_800_000_100_000;
    const h = health(statements, announced, () => t);
    const c = channel();
    for (let i = 0; i < 10; i++) {
      t += 5;
      h.succeeded(c);
      t += 5;
      await h.faulted(c, `alt-${i}`, 'provider answered HTTP 403');
    }
    expect(announced).toEqual([]);
    expect(await redis.zcard(keys.channelFaults(c.id))).toBe(1);
    // Every attempt counted in the window: 10 successes and 10 faults, with no flush.
    const counts = await redis.hgetall(keys.channelOutcomes(c.id));
    const sum = (kind: string) => Object.entries(counts).filter(([k]) => k.startsWith(kind) && k !== 'since').reduce((n, [, v]) => n + Number(v), 0);
    expect([sum('r'), sum('f')]).toEqual([20, 10]);
    // Nothing is left for the flush to report twice.
    await h.flush();
    expect(Object.entries(await redis.hgetall(keys.channelOutcomes(c.id))).filter(([k]) => k.startsWith('r')).reduce((n, [, v]) => n + Number(v), 0)).toBe(20);
    await h.stop();
  });

  it('never disables a channel with auto_ban false', async () => {
    const statements: string[] = [];
    const announced: number[] = [];
    const h = health(statements, announced, Date.now);
    const c = channel(false);
    for (let i = 0; i < 10; i++) await h.faulted(c, `q${i}`, 'provider answered HTTP 401');
    expect(announced).toEqual([]);
    expect(statements).toEqual([]);
    await h.stop();
  });
});
