// A billing worker whose BILLING_METRICS_PORT is taken stops at start-up, naming the port, as the relay
// does: it used to log a warning and run on without /metrics and /health, unseen by its probe.
import { execFile } from 'node:child_process';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../infra/project-root.js';
import { testConfig } from '../infra/testing/test-config.js';

describe('billing worker start-up', () => {
  it('exits 1 naming BILLING_METRICS_PORT when the port is taken, before reading anything', async () => {
    const taken = createServer();
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r));
    const port = (taken.address() as AddressInfo).port;
    const config = testConfig();
    try {
      const env = {
        ...process.env,
        NODE_ENV: 'test', LOG_LEVEL: 'info', KEY_SECRET: 'test-secret-0123456789abcdef', DATABASE_URL: config.DATABASE_URL,
        CLICKHOUSE_URL: config.CLICKHOUSE_URL, CLICKHOUSE_DATABASE: config.CLICKHOUSE_DATABASE, REDIS_URL: config.REDIS_URL,
        REDIS_PREFIX: config.REDIS_PREFIX, BILLING_METRICS_HOST: '127.0.0.1', BILLING_METRICS_PORT: String(port),
      };
      const run = await new Promise<{ code: number | null; output: string }>((resolve) => {
        execFile(process.execPath, [join(projectRoot(), 'dist/billing/main.js')], { cwd: projectRoot(), env, timeout: 20_000 }, (err, stdout, stderr) => {
          resolve({ code: err ? (typeof err.code === 'number' ? err.code : null) : 0, output: stdout + stderr });
        });
      });
      expect(run.code, run.output).toBe(1);
      expect(run.output).toContain(`billing metrics could not listen on 127.0.0.1:${port} (BILLING_METRICS_HOST, BILLING_METRICS_PORT)`);
      expect(run.output).toContain('EADDRINUSE');
      expect(run.output).not.toContain('billing worker started');
    } finally {
      await new Promise((r) => taken.close(r));
    }
  });
});
