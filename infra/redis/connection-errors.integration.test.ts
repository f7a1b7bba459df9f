// A Redis client whose connection fails (refused, reset by CLIENT KILL or a restart) writes nothing to
// stderr: ioredis printed "[ioredis] Unhandled error event" there, plain text among the services'
// JSON log lines, for every failed attempt while it reconnected. The failures are reported where
// they cost something (the commands reject; infra/redis/client.ts).
import { createServer, type AddressInfo } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { testConfig } from '../testing/test-config.js';
import { createRedis } from './client.js';

afterEach(() => {
  vi.restoreAllMocks();
});

describe('createRedis', () => {
  it('keeps connection errors off stderr while it reconnects, and its commands still fail', async () => {
    // A port that refuses: listened on, then closed.
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((r) => closed.close(r));
    const written: string[] = [];
    vi.spyOn(console, 'error').mockImplementation((...args: unknown[]) => void written.push(args.map(String).join(' ')));
    const redis = createRedis(testConfig({ REDIS_URL: `redis://127.0.0.1:${port}` }), 'refused-test');
    try {
      // Rejected once its retries are spent: each attempt met ECONNREFUSED (no listener of the test's
      // own here, which would itself keep ioredis quiet).
      await expect(redis.get('any')).rejects.toThrow(/max retries|ECONNREFUSED/);
      expect(written.filter((l) => l.includes('ioredis'))).toEqual([]);
    } finally {
      redis.disconnect();
    }
  });
});
