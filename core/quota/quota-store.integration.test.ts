// The reservation and settlement scripts against a real Redis.
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { createRedis } from '../../infra/redis/client.js';
import { redisKeys } from '../../infra/redis/keys.js';
import { testConfig } from '../../infra/testing/test-config.js';
import { QuotaStore } from './quota-store.js';
import { loadScriptDefs } from './scripts.js';

const config = testConfig();
const redis = createRedis(config, 'quota-test');
const keys = redisKeys(config.REDIS_PREFIX);
const pg = { account: new Map<number, number>(), token: new Map<number, number>() };
const store = new QuotaStore(redis, keys, {
  accountQuota: async (id) => pg.account.get(id) ?? 0,
  tokenRemainQuota: async (id) => pg.token.get(id) ?? 0,
});

let seq = 0;
const ids = () => ({ userId: 1000 + ++seq, tokenId: 5000 + seq, requestId: `req-${seq}` });

afterAll(async () => {
  const found = await redis.keys(`${config.REDIS_PREFIX}:*`);
  if (found.length) await redis.del(...found);
  await redis.quit();
});

beforeEach(() => {
  pg.account.clear();
  pg.token.clear();
});

async function streamEvents(): Promise<string[]> {
  const entries = (await redis.xrange(keys.usageStream(), '-', '+')) as [string, string[]][];
  return entries.map(([, f]) => f[1]!);
}

describe('reserveQuota-6.lua', () => {
  it('seeds the balance mirror from the book of record, then reserves atomically', async () => {
    const { userId, tokenId, requestId } = ids();
    pg.account.set(userId, 1000);
    const outcome = await store.reserve({ userId, tokenId, tokenLimited: false, requestId, amount: 300, deadlineMs: Date.now() + 60_000 });
    expect(outcome).toBe('reserved');
    expect(await store.accountBalance(userId)).toBe(700);
    expect(await redis.hgetall(keys.reservation(userId, requestId))).toMatchObject({ amount: '300', limited: '0' });
  });

  it('refuses when the balance is too low and moves nothing', async () => {
    const { userId, tokenId, requestId } = ids();
    pg.account.set(userId, 299);
    const outcome = await store.reserve({ userId, tokenId, tokenLimited: true, requestId, amount: 300, deadlineMs: Date.now() + 60_000 });
    expect(outcome).toBe('insufficient_balance');
    expect(await store.accountBalance(userId)).toBe(299);
    expect(await redis.exists(keys.reservation(userId, requestId))).toBe(0);
  });

  it('refuses when a limited key has too little quota left, leaving the account untouched', async () => {
    const { userId, tokenId, requestId } = ids();
    pg.account.set(userId, 10_000);
    pg.token.set(tokenId, 100);
    const outcome = await store.reserve({ userId, tokenId, tokenLimited: true, requestId, amount: 101, deadlineMs: Date.now() + 60_000 });
    expect(outcome).toBe('insufficient_token_quota');
    expect(await store.accountBalance(userId)).toBe(10_000);
    expect(await store.tokenRemain(userId, tokenId)).toBe(100);
  });

  it('debits a limited key and the account together', async () => {
    const { userId, tokenId, requestId } = ids();
    pg.account.set(userId, 10_000);
    pg.token.set(tokenId, 500);
    expect(await store.reserve({ userId, tokenId, tokenLimited: true, requestId, amount: 500, deadlineMs: 1 })).toBe('reserved');
    expect(await store.accountBalance(userId)).toBe(9_500);
    expect(await store.tokenRemain(userId, tokenId)).toBe(0);
  });

  it('refuses a second reservation under the same request id', async () => {
    const { userId, tokenId, requestId } = ids();
    pg.account.set(userId, 10_000);
    const r = { userId, tokenId, tokenLimited: false, requestId, amount: 10, deadlineMs: 1 };
    expect(await store.reserve(r)).toBe('reserved');
    expect(await store.reserve(r)).toBe('duplicate');
    expect(await store.accountBalance(userId)).toBe(9_990);
  });

  it('never lets concurrent reservations overdraw the balance', async () => {
    const { userId, tokenId } = ids();
    pg.account.set(userId, 1_000);
    const outcomes = await Promise.all(
      Array.from({ length: 50 }, (_, i) => store.reserve({ userId, tokenId, tokenLimited: false, requestId: `c${seq}-${i}`, amount: 70, deadlineMs: 1 })),
    );
    expect(outcomes.filter((o) => o === 'reserved')).toHaveLength(14);
    expect(await store.accountBalance(userId)).toBe(1_000 - 14 * 70);
  });
});

describe('settleReservation-7.lua', () => {
  it('returns the unused part, debits the actual cost and appends the event, once', async () => {
    const { userId, tokenId, requestId } = ids();
    pg.account.set(userId, 1_000);
    pg.token.set(tokenId, 800);
    await store.reserve({ userId, tokenId, tokenLimited: true, requestId, amount: 400, deadlineMs: 1 });
    const before = (await streamEvents()).length;
    expect(await store.settle({ userId, tokenId, requestId, cost: 123, eventJson: `{"r":"${requestId}"}` })).toBe(true);
    expect(await store.accountBalance(userId)).toBe(1_000 - 123);
    expect(await store.tokenRemain(userId, tokenId)).toBe(800 - 123);
    expect(await redis.exists(keys.reservation(userId, requestId))).toBe(0);
    expect(await store.settle({ userId, tokenId, requestId, cost: 123, eventJson: `{"r":"${requestId}"}` })).toBe(false);
    expect(await store.accountBalance(userId)).toBe(1_000 - 123);
    const events = await streamEvents();
    expect(events.length - before).toBe(1);
    expect(events.at(-1)).toBe(`{"r":"${requestId}"}`);
  });

  it('refunds the whole reservation when the cost is zero', async () => {
    const { userId, tokenId, requestId } = ids();
    pg.account.set(userId, 1_000);
    await store.reserve({ userId, tokenId, tokenLimited: false, requestId, amount: 999, deadlineMs: 1 });
    await store.settle({ userId, tokenId, requestId, cost: 0, eventJson: '{}' });
    expect(await store.accountBalance(userId)).toBe(1_000);
  });
});

describe('rate limits in reserveQuota-6.lua and settleReservation-7.lua', () => {
  it('refuses the request over the per-minute request limit without moving quota', async () => {
    const { userId, tokenId } = ids();
    pg.account.set(userId, 10_000);
    const minute = 29_000_000;
    const base = { userId, tokenId, tokenLimited: false, amount: 10, deadlineMs: 1, rpmLimit: 3, minute };
    for (let i = 0; i < 3; i++) expect(await store.reserve({ ...base, requestId: `rpm-${seq}-${i}` })).toBe('reserved');
    expect(await store.reserve({ ...base, requestId: `rpm-${seq}-x` })).toBe('rpm_limited');
    expect(await store.accountBalance(userId)).toBe(10_000 - 30);
    // A new minute is a new window.
    expect(await store.reserve({ ...base, minute: minute + 1, requestId: `rpm-${seq}-y` })).toBe('reserved');
  });

  it('counts settled tokens against the per-minute token limit', async () => {
    const { userId, tokenId, requestId } = ids();
    pg.account.set(userId, 10_000);
    const minute = 29_000_100;
    const base = { userId, tokenId, tokenLimited: false, amount: 10, deadlineMs: 1, tpmLimit: 100, minute };
    expect(await store.reserve({ ...base, requestId })).toBe('reserved');
    await store.settle({ userId, tokenId, requestId, cost: 5, eventJson: '{}', tokens: 100, minute });
    expect(await store.reserve({ ...base, requestId: requestId + 'b' })).toBe('tpm_limited');
    expect(await store.accountBalance(userId)).toBe(10_000 - 5);
  });
});

describe('releasing expired reservations', () => {
  it('gives an expired reservation back, logs it, and still bills a late settlement exactly once', async () => {
    const { userId, tokenId, requestId } = ids();
    pg.account.set(userId, 1_000);
    pg.token.set(tokenId, 1_000);
    const now = Date.now();
    await store.reserve({ userId, tokenId, tokenLimited: true, requestId, amount: 400, deadlineMs: now - 1 });
    const fresh = `${requestId}-fresh`;
    await store.reserve({ userId, tokenId, tokenLimited: true, requestId: fresh, amount: 100, deadlineMs: now + 60_000 });
    expect(await store.accountBalance(userId)).toBe(500);

    const logged: string[] = [];
    const released = await store.releaseExpired(now, 1000, (r) => {
      logged.push(`${r.userId}/${r.tokenId}/${r.requestId}/${r.amount}`);
      return JSON.stringify({ expired: r.requestId });
    });
    expect(released).toBeGreaterThanOrEqual(1);
    expect(logged).toContain(`${userId}/${tokenId}/${requestId}/400`);
    expect(logged.some((l) => l.includes(fresh))).toBe(false);
    expect(await store.accountBalance(userId)).toBe(900);
    expect(await store.tokenRemain(userId, tokenId)).toBe(900);
    expect((await streamEvents()).at(-1)).toBe(JSON.stringify({ expired: requestId }));

    // The relay was alive after all: its settlement debits the actual cost from the restored balance.
    expect(await store.settle({ userId, tokenId, requestId, cost: 70, eventJson: '{"late":1}' })).toBe(true);
    expect(await store.accountBalance(userId)).toBe(830);
    expect(await store.tokenRemain(userId, tokenId)).toBe(830);
    expect(await store.settle({ userId, tokenId, requestId, cost: 70, eventJson: '{"late":2}' })).toBe(false);
    expect(await store.accountBalance(userId)).toBe(830);
    // Nothing left to release.
    expect(await store.releaseExpired(now, 1000, () => '{}')).toBe(0);
  });
});

describe('renewed deadlines (the relay heartbeat)', () => {
  it('keeps a renewed reservation from the reaper and does not bring back a settled one', async () => {
    const { userId, tokenId, requestId } = ids();
    pg.account.set(userId, 1_000);
    const now = Date.now();
    await store.reserve({ userId, tokenId, tokenLimited: false, requestId, amount: 400, deadlineMs: now - 1 });
    const settled = `${requestId}-settled`;
    await store.reserve({ userId, tokenId, tokenLimited: false, requestId: settled, amount: 100, deadlineMs: now - 1 });
    await store.settle({ userId, tokenId, requestId: settled, cost: 10, eventJson: '{}' });
    await store.renewDeadlines([{ userId, requestId }, { userId, requestId: settled }], now + 60_000);
    expect(await redis.zscore(keys.reservationDeadlines(), `${userId}:${settled}`)).toBeNull();
    const logged: string[] = [];
    await store.releaseExpired(now, 1000, (r) => { logged.push(r.requestId); return '{}'; });
    expect(logged).not.toContain(requestId);
    expect(await redis.exists(keys.reservation(userId, requestId))).toBe(1);
    expect(await store.accountBalance(userId)).toBe(1_000 - 400 - 10);
  });

  it('leaves a reservation whose deadline is renewed between the reaper reading it and releasing it', async () => {
    const { userId, tokenId, requestId } = ids();
    pg.account.set(userId, 1_000);
    const now = Date.now();
    await store.reserve({ userId, tokenId, tokenLimited: false, requestId, amount: 400, deadlineMs: now - 1 });
    const read = redis.zrangebyscore.bind(redis);
    // The heartbeat lands right after the reaper's read: the script sees the new deadline.
    (redis as unknown as { zrangebyscore: unknown }).zrangebyscore = async (...args: Parameters<typeof read>) => {
      const members = await read(...args);
      await store.renewDeadlines([{ userId, requestId }], now + 60_000);
      return members;
    };
    const logged: string[] = [];
    try {
      await store.releaseExpired(now, 1000, (r) => { logged.push(r.requestId); return '{}'; });
    } finally {
      delete (redis as unknown as { zrangebyscore?: unknown }).zrangebyscore;
    }
    expect(logged).toContain(requestId);
    expect(await redis.exists(keys.reservation(userId, requestId))).toBe(1);
    expect(await redis.zscore(keys.reservationDeadlines(), `${userId}:${requestId}`)).toBe(String(now + 60_000));
    expect(await store.accountBalance(userId)).toBe(600);
    // Its relay settles it as usual, once.
    expect(await store.settle({ userId, tokenId, requestId, cost: 50, eventJson: '{}' })).toBe(true);
    expect(await store.accountBalance(userId)).toBe(950);
  });
});

describe('adjustBalance-1.lua', () => {
  it('moves a loaded mirror by the delta and leaves an unloaded one alone', async () => {
    const { userId, tokenId, requestId } = ids();
    await store.adjustAccount(userId, 500);
    expect(await store.accountBalance(userId)).toBeNull();
    pg.account.set(userId, 100);
    await store.reserve({ userId, tokenId, tokenLimited: false, requestId, amount: 50, deadlineMs: 1 });
    await store.adjustAccount(userId, 500);
    expect(await store.accountBalance(userId)).toBe(550);
    await store.adjustAccount(userId, -600);
    expect(await store.accountBalance(userId)).toBe(-50);
  });
});

describe('adjustBalanceOnce-3.lua', () => {
  it('applies a console change to the mirror once, however often it is retried', async () => {
    const { userId, tokenId, requestId } = ids();
    pg.account.set(userId, 100);
    await store.reserve({ userId, tokenId, tokenLimited: false, requestId, amount: 10, deadlineMs: 1 });
    await store.adjustAccountOnce(userId, 500, 77);
    await store.adjustAccountOnce(userId, 500, 77);
    expect(await store.accountBalance(userId)).toBe(590);
    await store.adjustAccountOnce(userId, -40, 78);
    expect(await store.accountBalance(userId)).toBe(550);
  });

  it('marks a change applied even when the mirror is not loaded, so a later retry does not add it again', async () => {
    const { userId, tokenId, requestId } = ids();
    await store.adjustAccountOnce(userId, 500, 91);
    expect(await store.accountBalance(userId)).toBeNull();
    pg.account.set(userId, 600);
    await store.reserve({ userId, tokenId, tokenLimited: false, requestId, amount: 0, deadlineMs: 1 });
    await store.adjustAccountOnce(userId, 500, 91);
    expect(await store.accountBalance(userId)).toBe(600);
  });

  it('skips a change the seeded mirror already holds, and applies a newer one', async () => {
    const { userId } = ids();
    const seeded = new QuotaStore(redis, keys, {
      accountQuota: async () => { throw new Error('accountSeed is preferred'); },
      tokenRemainQuota: async () => 0,
      // Postgres after credits 1..3 committed: their follow-ups must not add them again.
      accountSeed: async () => ({ quota: 1_000, creditSeq: 3 }),
    });
    expect(await seeded.seedAccount(userId)).toBe(true);
    expect(await seeded.seedAccount(userId)).toBe(false);
    await seeded.adjustAccountOnce(userId, 250, 201, 3);
    await seeded.adjustAccountOnce(userId, 250, 200, 2);
    expect(await seeded.accountBalance(userId)).toBe(1_000);
    await seeded.adjustAccountOnce(userId, -100, 202, 4);
    await seeded.adjustAccountOnce(userId, -100, 202, 4);
    expect(await seeded.accountBalance(userId)).toBe(900);
    // A row from before sequences moves a loaded mirror as it always did.
    await seeded.adjustAccountOnce(userId, 5, 203, null);
    expect(await seeded.accountBalance(userId)).toBe(905);
  });
});

describe('seedBalance-2.lua', () => {
  it('refuses a seed read before a change that reached Redis while the mirror was unloaded, and reads again', async () => {
    const { userId } = ids();
    let pgRow = { quota: 1_000, creditSeq: 3 };
    let reads = 0;
    const s: QuotaStore = new QuotaStore(redis, keys, {
      accountQuota: async () => 0, tokenRemainQuota: async () => 0,
      accountSeed: async () => {
        const read = pgRow;
        if (reads++ === 0) {
          // Between this read and the seed, a credit commits (seq 4) and its mirror step finds no mirror.
          pgRow = { quota: 1_250, creditSeq: 4 };
          await s.adjustAccountOnce(userId, 250, 301, 4);
        }
        return read;
      },
    });
    await s.seedAccount(userId);
    expect(await s.accountBalance(userId)).toBe(1_250);
    expect(reads).toBe(2);
  });

  it('seeds the balance and its credit sequence together, and leaves a loaded mirror as it is', async () => {
    const { userId } = ids();
    let read = { quota: 700, creditSeq: 9 };
    const s = new QuotaStore(redis, keys, { accountQuota: async () => 0, tokenRemainQuota: async () => 0, accountSeed: async () => read });
    await redis.set(keys.accountCreditSeq(userId), 2); // left by an earlier seed of a mirror since lost
    expect(await s.seedAccount(userId)).toBe(true);
    expect([await redis.get(keys.accountBalance(userId)), await redis.get(keys.accountCreditSeq(userId))]).toEqual(['700', '9']);
    read = { quota: 1, creditSeq: 10 };
    expect(await s.seedAccount(userId)).toBe(false);
    expect([await redis.get(keys.accountBalance(userId)), await redis.get(keys.accountCreditSeq(userId))]).toEqual(['700', '9']);
  });
});

describe('script registration', () => {
  it('names each command name:version with the key count from the file name', () => {
    const defs = loadScriptDefs();
    expect(defs.get('reserveQuota')).toMatchObject({ numberOfKeys: 6 });
    expect(defs.get('settleReservation')).toMatchObject({ numberOfKeys: 7 });
    expect(defs.get('adjustBalance')).toMatchObject({ numberOfKeys: 1 });
    expect(defs.get('adjustBalanceOnce')).toMatchObject({ numberOfKeys: 3 });
    expect(defs.get('seedBalance')).toMatchObject({ numberOfKeys: 2 });
    for (const def of defs.values()) expect(def.command).toMatch(new RegExp(`^${def.name}:[0-9a-f]{10}$`));
  });
});
