// The billing worker's Lua scripts (billing/lua/), each on its own: what it answers, what it writes,
// and which of them Redis runs at maxmemory with noeviction (a redis-server of the test's own, port
// 7464): the read, the acknowledgement and the group creation must (billing is what frees Redis
// memory); the dead letter must not, leaving its entries pending.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedis, type Redis } from '../infra/redis/client.js';
import { testConfig } from '../infra/testing/test-config.js';
import { startRedisServer, type OwnRedisServer } from '../tests/chaos/redis-server.js';
import { usageScripts, type UsageScripts } from './usage-scripts.js';

const OOM_PORT = 7464;
const GROUP = 'billing';

let server: OwnRedisServer;
let shared: Redis;
let own: Redis;

beforeAll(async () => {
  shared = createRedis(testConfig(), 'usage-scripts-test');
  server = await startRedisServer({ port: OOM_PORT, aof: false });
  own = createRedis(testConfig({ REDIS_URL: server.url }), 'usage-scripts-oom-test');
});
afterAll(async () => {
  shared?.disconnect();
  own?.disconnect();
  await server?.close();
});

function names() {
  const p = `usage-scripts-${randomUUID().slice(0, 8)}`;
  return { stream: `${p}:usage`, dead: `${p}:usage:dead`, incarnation: `${p}:incarnation`, prefix: p };
}

async function cleanup(redis: Redis, prefix: string): Promise<void> {
  const left = await redis.keys(`${prefix}:*`);
  if (left.length) await redis.del(...left);
}

type Entries = [string, string[]][];

async function pending(redis: Redis, stream: string): Promise<string[]> {
  return ((await redis.xpending(stream, GROUP, '-', '+', 100)) as [string][]).map((r) => r[0]);
}

describe('billing Lua scripts', () => {
  let s: UsageScripts;
  beforeAll(() => {
    s = usageScripts(shared);
  });

  it('ensureUsageGroup-1: creates the group (and the stream) once, then answers that it exists', async () => {
    const { stream, prefix } = names();
    try {
      expect(await s.ensureGroup(stream, GROUP, '0')).toBe(true);
      expect(await s.ensureGroup(stream, GROUP, '0')).toBe(false);
      const groups = (await shared.xinfo('GROUPS', stream)) as unknown[][];
      expect(groups.map((g) => g[1])).toEqual([GROUP]);
      await shared.set(`${prefix}:str`, 'x');
      await expect(s.ensureGroup(`${prefix}:str`, GROUP, '0')).rejects.toThrow(/WRONGTYPE/);
    } finally {
      await cleanup(shared, prefix);
    }
  });

  it('readUsageEntries-2: the read and the data id, created once (SET NX), kept after', async () => {
    const { stream, incarnation, prefix } = names();
    try {
      await expect(s.read(stream, incarnation, 'first', GROUP, 'c1', 10, { mode: 'read', id: '>' })).rejects.toThrow(/NOGROUP/);
      await s.ensureGroup(stream, GROUP, '0');
      const a = await shared.xadd(stream, '*', 'e', 'a');
      const b = await shared.xadd(stream, '*', 'e', 'b');
      // New entries: the id is created by this call.
      const [id1, r1] = await s.read(stream, incarnation, 'first', GROUP, 'c1', 1, { mode: 'read', id: '>' });
      expect(id1).toBe('first');
      expect(r1).toEqual([[stream, [[a, ['e', 'a']]]]]);
      // Another candidate id changes nothing: the data's id stays.
      const [id2, r2] = await s.read(stream, incarnation, 'second', GROUP, 'c1', 10, { mode: 'read', id: '0' });
      expect(id2).toBe('first');
      expect(r2).toEqual([[stream, [[a, ['e', 'a']]]]]);
      // Nothing new for a read past the end: nil, as XREADGROUP answers.
      await s.read(stream, incarnation, 'x', GROUP, 'c1', 10, { mode: 'read', id: '>' });
      const [, none] = await s.read(stream, incarnation, 'x', GROUP, 'c1', 10, { mode: 'read', id: '>' });
      expect(none).toBeNull();
      // A claim of entries idle at any consumer: [next id, entries, deleted ids].
      const [, claimed] = await s.read(stream, incarnation, 'x', GROUP, 'c2', 10, { mode: 'claim', minIdleMs: 0 });
      expect(claimed).toEqual(['0-0', [[a, ['e', 'a']], [b, ['e', 'b']]], []]);
      expect(await shared.get(incarnation)).toBe('first');
      // Read as the data the caller last read from: read. As other data (a Redis swapped under the
      // caller, or restarted empty): nothing read, the id returned, flagged.
      const c = await shared.xadd(stream, '*', 'e', 'c');
      const [, same] = await s.read(stream, incarnation, 'x', GROUP, 'c1', 10, { mode: 'read', id: '>' }, 'first');
      expect(same).toEqual([[stream, [[c, ['e', 'c']]]]]);
      const d = await shared.xadd(stream, '*', 'e', 'd');
      expect(await s.read(stream, incarnation, 'x', GROUP, 'c1', 10, { mode: 'read', id: '>' }, 'another')).toEqual(['first', null, 1]);
      await shared.del(incarnation);
      expect(await s.read(stream, incarnation, 'renewed', GROUP, 'c1', 10, { mode: 'read', id: '>' }, 'first')).toEqual(['renewed', null, 1]);
      const [, after] = await s.read(stream, incarnation, 'x', GROUP, 'c1', 10, { mode: 'read', id: '>' }, 'renewed');
      expect(after).toEqual([[stream, [[d, ['e', 'd']]]]]);
    } finally {
      await cleanup(shared, prefix);
    }
  });

  it('ackUsageEntries-1: acknowledges and deletes, in slices past Lua\'s unpack limit', async () => {
    const { stream, prefix } = names();
    try {
      await s.ensureGroup(stream, GROUP, '0');
      const pipe = shared.pipeline();
      for (let i = 0; i < 2_500; i++) pipe.xadd(stream, '*', 'e', String(i));
      await pipe.exec();
      const read = (await shared.xreadgroup('GROUP', GROUP, 'c1', 'COUNT', 3_000, 'STREAMS', stream, '>')) as [string, Entries][];
      const ids = read[0]![1].map(([id]) => id);
      const keep = ids.pop()!;
      expect(await s.acknowledge(stream, GROUP, ids)).toBe(2_499);
      expect(await pending(shared, stream)).toEqual([keep]);
      expect((await shared.xrange(stream, '-', '+')).map(([id]) => id)).toEqual([keep]);
      // Again: nothing pending any more, nothing left to delete.
      expect(await s.acknowledge(stream, GROUP, ids.slice(0, 3))).toBe(0);
    } finally {
      await cleanup(shared, prefix);
    }
  });

  it('deadLetterUsageEntries-2: writes the dead letters, then acknowledges; a dead-letter key of another type: nothing at all', async () => {
    const { stream, dead, prefix } = names();
    try {
      await s.ensureGroup(stream, GROUP, '0');
      const a = (await shared.xadd(stream, '*', 'e', 'bad a'))!;
      const b = (await shared.xadd(stream, '*', 'e', 'bad b1\nbad b2'))!;
      await shared.xreadgroup('GROUP', GROUP, 'c1', 'COUNT', 10, 'STREAMS', stream, '>');
      const letters = [['source_id', a, 'e', 'bad a'], ['source_id', b, 'e', 'bad b1'], ['source_id', b, 'e', 'bad b2', 'i', 'inc']];

      await shared.set(dead, 'not a stream');
      await expect(s.deadLetter(stream, dead, GROUP, [a, b], letters)).rejects.toThrow(/^WRONGTYPE/);
      expect(await pending(shared, stream)).toEqual([a, b]);
      expect(await shared.xlen(stream)).toBe(2);
      expect(await shared.get(dead)).toBe('not a stream');

      await shared.del(dead);
      expect(await s.deadLetter(stream, dead, GROUP, [a, b], letters)).toBe(3);
      expect(((await shared.xrange(dead, '-', '+')) as Entries).map(([, f]) => f)).toEqual(letters);
      expect(await pending(shared, stream)).toEqual([]);
      expect(await shared.xlen(stream)).toBe(0);
    } finally {
      await cleanup(shared, prefix);
    }
  });

  it('at maxmemory (noeviction): read, acknowledge and group creation run; the dead letter is refused and its entry stays pending', async () => {
    const o = usageScripts(own);
    const { stream, dead, incarnation, prefix } = names();
    const other = `${prefix}:other`;
    for (let i = 0; i < 20; i++) await own.xadd(stream, '*', 'e', `event ${i}`, 'pad', 'x'.repeat(1_000));
    await own.xadd(other, '*', 'e', 'x');
    await own.config('SET', 'maxmemory-policy', 'noeviction');
    const used = Number(/used_memory:(\d+)/.exec(await own.info('memory'))![1]);
    await own.config('SET', 'maxmemory', String(used - 16 * 1024));
    try {
      await expect(own.set(`${prefix}:probe`, '1')).rejects.toThrow(/^OOM/);
      await expect(own.xgroup('CREATE', stream, GROUP, '0')).rejects.toThrow(/^OOM/);
      await expect(own.multi().xack(stream, GROUP, '0-1').exec()).rejects.toThrow(/EXECABORT/);

      expect(await o.ensureGroup(stream, GROUP, '0')).toBe(true);
      expect(await o.ensureGroup(stream, GROUP, '0')).toBe(false);
      // The data id is created at the limit too: a few bytes, once.
      const [id, reply] = await o.read(stream, incarnation, 'inc-1', GROUP, 'c1', 5, { mode: 'read', id: '>' });
      expect(id).toBe('inc-1');
      const ids = (reply as [string, Entries][])[0]![1].map(([entryId]) => entryId);
      expect(ids).toHaveLength(5);
      const [, claimed] = await o.read(stream, incarnation, 'inc-2', GROUP, 'c2', 2, { mode: 'claim', minIdleMs: 0 });
      expect((claimed as [string, Entries])[1]).toHaveLength(2);

      await expect(o.deadLetter(stream, dead, GROUP, [ids[4]!], [['source_id', ids[4]!, 'e', 'x']])).rejects.toThrow(/^OOM/);
      expect(await own.exists(dead)).toBe(0);
      expect(await o.acknowledge(stream, GROUP, ids.slice(0, 4))).toBe(4);
      expect(await pending(own, stream)).toEqual([ids[4]]);
      expect(await own.xlen(stream)).toBe(16);
    } finally {
      await own.config('SET', 'maxmemory', '0');
      await cleanup(own, prefix);
    }
  });
});
