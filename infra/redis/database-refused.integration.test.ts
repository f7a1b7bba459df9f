// REDIS_URL naming a database the server does not have: ioredis reports the failed SELECT as an error
// event and serves the connection on database 0, another stack's keys. The process must stop instead,
// saying so, with nothing written to database 0 (infra/redis/client.ts, stopOnRefusedDatabase).
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../project-root.js';
import { CONFIG_ERROR_EXIT_CODE } from '../config.js';
import { testConfig } from '../testing/test-config.js';
import { createRedis, redisClusterNodes } from './client.js';

describe('a database the Redis server does not have', () => {
  it('stops the billing worker at connect time, naming REDIS_URL, and nothing lands in database 0', async (ctx) => {
    const config = testConfig();
    if (redisClusterNodes(config) !== null) ctx.skip(); // a cluster has database 0 only, refused at load
    const admin = createRedis(config, 'database-refused-test');
    try {
      const [, databases] = (await admin.config('GET', 'databases')) as [string, string];
      const url = new URL(config.REDIS_URL);
      url.pathname = `/${databases}`; // the first index past the last it has
      const env = {
        ...process.env,
        NODE_ENV: 'test', LOG_LEVEL: 'info', KEY_SECRET: 'test-secret-0123456789abcdef', DATABASE_URL: config.DATABASE_URL,
        CLICKHOUSE_URL: config.CLICKHOUSE_URL, CLICKHOUSE_DATABASE: config.CLICKHOUSE_DATABASE,
        REDIS_URL: url.toString(), REDIS_PREFIX: config.REDIS_PREFIX, BILLING_METRICS_PORT: '0',
      };
      const run = await new Promise<{ code: number | null; output: string }>((resolve) => {
        execFile(process.execPath, [join(projectRoot(), 'dist/billing/main.js')], { cwd: projectRoot(), env, timeout: 20_000 }, (err, stdout, stderr) => {
          resolve({ code: err ? (typeof err.code === 'number' ? err.code : null) : 0, output: stdout + stderr });
        });
      });
      // 78 (EX_CONFIG): the supervisor leaves it down rather than starting it again to fail the same way.
      expect(run.code, run.output).toBe(CONFIG_ERROR_EXIT_CODE);
      expect(run.output).toContain(`REDIS_URL: the Redis server refused database ${databases} (ERR DB index is out of range)`);
      expect(run.output).not.toContain('billing worker started');
      // Database 0 (and any other of the test's own Redis) holds nothing of this worker's prefix.
      expect(await admin.keys(`${config.REDIS_PREFIX}:*`)).toEqual([]);
    } finally {
      admin.disconnect();
    }
  });
});
