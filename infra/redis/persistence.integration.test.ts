// The start-up check of Redis persistence: against the machine's Redis (run without AOF here) the
// warning must fire; AOF on stays quiet; a Redis with CONFIG disabled is judged from INFO persistence.
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { createRedis, type Redis } from './client.js';
import { testConfig } from '../testing/test-config.js';
import { checkRedisPersistence } from './persistence.js';

const config = testConfig();
const redis = createRedis(config, 'persistence-test');

function capture() {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      for (const l of String(chunk).split('\n')) if (l) lines.push(JSON.parse(l) as Record<string, unknown>);
      cb();
    },
  });
  return { log: pino({ level: 'info' }, sink), lines };
}

/** A stand-in answering CONFIG and INFO as a given Redis would. */
function fakeRedis(opts: { config?: Record<string, string> | Error; info?: string | Error }): Redis {
  return {
    config: async (_op: string, ...names: string[]) => {
      if (opts.config instanceof Error) throw opts.config;
      return names.flatMap((n) => (opts.config as Record<string, string>)[n] === undefined ? [] : [n, (opts.config as Record<string, string>)[n]!]);
    },
    info: async () => {
      if (opts.info instanceof Error) throw opts.info;
      return opts.info ?? '';
    },
  } as unknown as Redis;
}

afterAll(() => redis.disconnect());

describe('checkRedisPersistence', () => {
  it('warns against the machine Redis, which runs without AOF', async () => {
    const [, appendonly] = (await redis.config('GET', 'appendonly')) as string[];
    expect(appendonly).toBe('no'); // what this test is about: if it changes, the test below proves less
    const { log, lines } = capture();
    const state = await checkRedisPersistence(redis, log, 'test');
    expect(state).toMatchObject({ aof: false, source: 'config' });
    const warn = lines.find((l) => l.level === 40);
    expect(warn, 'a warn line').toBeDefined();
    expect(String(warn!.msg)).toMatch(/persistence is off/);
    expect(String(warn!.atRisk)).toMatch(/not yet billed/);
  });

  it('stays quiet with AOF on and fsync every second', async () => {
    const { log, lines } = capture();
    const state = await checkRedisPersistence(fakeRedis({ config: { appendonly: 'yes', appendfsync: 'everysec', save: '' } }), log, 'test');
    expect(state).toMatchObject({ aof: true, appendfsync: 'everysec', source: 'config' });
    expect(lines.filter((l) => (l.level as number) >= 40)).toEqual([]);
  });

  it('warns when AOF is on but left to the OS to flush (appendfsync no)', async () => {
    const { log, lines } = capture();
    await checkRedisPersistence(fakeRedis({ config: { appendonly: 'yes', appendfsync: 'no', save: '' } }), log, 'test');
    expect(lines.filter((l) => l.level === 40)).toHaveLength(1);
  });

  it('reads INFO persistence when CONFIG is disabled (managed Redis)', async () => {
    const disabled = new Error("ERR unknown command 'CONFIG', with args beginning with: 'GET' 'appendonly'");
    const on = capture();
    expect(await checkRedisPersistence(fakeRedis({ config: disabled, info: '# Persistence\r\nloading:0\r\naof_enabled:1\r\n' }), on.log, 'test'))
      .toMatchObject({ aof: true, source: 'info' });
    expect(on.lines.filter((l) => (l.level as number) >= 40)).toEqual([]);
    const off = capture();
    expect(await checkRedisPersistence(fakeRedis({ config: disabled, info: '# Persistence\r\naof_enabled:0\r\n' }), off.log, 'test'))
      .toMatchObject({ aof: false, source: 'info' });
    expect(off.lines.filter((l) => l.level === 40)).toHaveLength(1);
  });

  it('warns that it cannot tell when neither CONFIG nor INFO answers, and never throws', async () => {
    const { log, lines } = capture();
    const state = await checkRedisPersistence(fakeRedis({ config: new Error('NOPERM'), info: new Error('NOPERM') }), log, 'test');
    expect(state).toMatchObject({ aof: null, source: 'unknown' });
    expect(lines.filter((l) => l.level === 40)).toHaveLength(1);
  });
});
