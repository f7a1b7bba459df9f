// recordChannelOutcome-2.lua against a real Redis: the consecutive rule, the rate rule over its
// window, successes reported late, the epoch reset, and the bounds on what it keeps.
import { afterAll, describe, expect, it } from 'vitest';
import { createRedis } from '../../infra/redis/client.js';
import { redisKeys } from '../../infra/redis/keys.js';
import { testConfig } from '../../infra/testing/test-config.js';
import { recordChannelOutcomeScript } from './health-scripts.js';

const config = testConfig();
const redis = createRedis(config, 'channel-outcome-test');
const keys = redisKeys(config.REDIS_PREFIX);
const record = recordChannelOutcomeScript(redis);

afterAll(async () => {
  const found = await redis.keys(`${config.REDIS_PREFIX}:*`);
  if (found.length) await redis.del(...found);
  await redis.quit();
});

let nextChannel = 100;
interface Call { now: number; faults?: number; successes?: number; lastOk?: number; epoch?: number; member?: string; consecutive?: number; rate?: number; windowMs?: number; minAttempts?: number; bucketMs?: number }
function recorder() {
  const id = nextChannel++;
  let seq = 0;
  return (c: Call) => record(
    keys.channelFaults(id), keys.channelOutcomes(id),
    c.now, c.faults ?? 0, c.successes ?? 0, c.lastOk ?? 0, c.epoch ?? 0, c.member ?? `req-${++seq}`,
    c.consecutive ?? 3, c.rate ?? 0, c.windowMs ?? 60_000, c.minAttempts ?? 10, c.bucketMs ?? 10_000,
  ).then(([verdict, consecutive, attempts, faults]) => ({ verdict, consecutive, attempts, faults }));
}

const T = 1_800_000_000_000;

describe('the consecutive rule', () => {
  it('trips on the Nth fault in a row, not before', async () => {
    const rec = recorder();
    expect(await rec({ now: T, faults: 1 })).toMatchObject({ verdict: 0, consecutive: 1 });
    expect(await rec({ now: T + 1, faults: 1 })).toMatchObject({ verdict: 0, consecutive: 2 });
    expect(await rec({ now: T + 2, faults: 1 })).toMatchObject({ verdict: 1, consecutive: 3 });
  });

  it('a success reported later still breaks the run of the faults before it, not of those after', async () => {
    const rec = recorder();
    await rec({ now: T, faults: 1 });
    await rec({ now: T + 10, faults: 1 });
    await rec({ now: T + 30, faults: 1, consecutive: 10 });
    // A relay's batch arrives after the three faults, saying its last success was at T + 20.
    expect(await rec({ now: T + 40, successes: 5, lastOk: T + 20 })).toMatchObject({ verdict: 0, consecutive: 1 });
    // An older success report changes nothing.
    expect(await rec({ now: T + 50, successes: 1, lastOk: T + 5 })).toMatchObject({ consecutive: 1 });
    expect(await rec({ now: T + 60, faults: 1 })).toMatchObject({ verdict: 0, consecutive: 2 });
  });

  it('a success batch never trips, whatever the counts', async () => {
    const rec = recorder();
    for (let i = 0; i < 5; i++) await rec({ now: T + i, faults: 1, consecutive: 100 });
    // Five faults in a row, over a threshold of 3 (kept: the 3 a decision needs), yet no verdict.
    expect(await rec({ now: T + 10, successes: 1, lastOk: 0, consecutive: 3 })).toMatchObject({ verdict: 0, consecutive: 3 });
  });

  it('0 turns the rule off, and the faults kept stay bounded', async () => {
    const rec = recorder();
    let last = { verdict: -1, consecutive: 0 };
    for (let i = 0; i < 1005; i++) last = await rec({ now: T + i, faults: 1, consecutive: 0 });
    expect(last).toMatchObject({ verdict: 0, consecutive: 1000 });
  });
});

describe('the rate rule', () => {
  it('trips when faults reach the rate with enough attempts in the window', async () => {
    const rec = recorder();
    const common = { consecutive: 0, rate: 0.5, minAttempts: 10 };
    await rec({ now: T, successes: 5, lastOk: T, ...common });
    for (let i = 1; i <= 4; i++) expect(await rec({ now: T + i, faults: 1, ...common })).toMatchObject({ verdict: 0, attempts: 5 + i, faults: i });
    // 10 attempts, 5 faults: 50 %.
    expect(await rec({ now: T + 5, faults: 1, ...common })).toMatchObject({ verdict: 2, attempts: 10, faults: 5 });
  });

  it('forgets attempts older than the window', async () => {
    const rec = recorder();
    const common = { consecutive: 0, rate: 0.5, minAttempts: 4, windowMs: 60_000, bucketMs: 10_000 };
    for (let i = 0; i < 3; i++) await rec({ now: T + i, faults: 1, ...common });
    // Two minutes later the three old faults are out of the window.
    expect(await rec({ now: T + 120_000, faults: 1, ...common })).toMatchObject({ verdict: 0, attempts: 1, faults: 1 });
    const fields = await redis.hkeys(keys.channelOutcomes(nextChannel - 1));
    expect(fields.length).toBeLessThan(2 * 6 + 8);
  });
});

describe('the epoch', () => {
  it('a newer status change clears the counts: a re-enabled channel starts clean', async () => {
    const rec = recorder();
    await rec({ now: T, faults: 1 });
    await rec({ now: T + 1, faults: 1 });
    expect(await rec({ now: T + 5000, faults: 1, epoch: T + 4000 })).toMatchObject({ verdict: 0, consecutive: 1, attempts: 1, faults: 1 });
    // The same epoch again changes nothing.
    expect(await rec({ now: T + 5001, faults: 1, epoch: T + 4000 })).toMatchObject({ consecutive: 2 });
  });
});
