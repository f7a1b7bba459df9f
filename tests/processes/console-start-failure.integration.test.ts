// A relay or console-api started while Postgres does not answer: one line naming DATABASE_URL and the
// address (never its user information), exit 1 for its supervisor to start it again. Before: "Error:
// connect ECONNREFUSED" with its stack, naming no variable (review operator, finding 5; the relay's
// until the session of 2026-11-30 16:30 UTC).
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../../infra/project-root.js';
import { freePort } from '../../infra/testing/free-port.js';

describe('a service started without its Postgres', () => {
  it.each([
    { service: 'console-api', main: 'dist/console-api/main.js', line: 'console-api failed to start' },
    { service: 'relay', main: 'dist/relay/main.js', line: 'relay failed to start' },
  ])('$service says so in one line naming DATABASE_URL and exits 1', async ({ main, line }) => {
    const port = await freePort();
    const env = {
      ...process.env,
      NODE_ENV: 'test', KEY_SECRET: 'test-secret-0123456789abcdef', CONSOLE_HOST: '127.0.0.1', CONSOLE_PORT: '0',
      RELAY_HOST: '127.0.0.1', RELAY_PORT: '0', RELAY_METRICS_PORT: 'off', LOG_LEVEL: 'info',
      DATABASE_URL: `postgres://postgres:a-password@127.0.0.1:${port}/gateway`, REDIS_PREFIX: 'console-start-failure',
    };
    const run = await new Promise<{ code: number | null; output: string }>((resolve) => {
      execFile(process.execPath, [join(projectRoot(), main)], { cwd: projectRoot(), env, timeout: 30_000 }, (err, stdout, stderr) => {
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : null) : 0, output: stdout + stderr });
      });
    });
    expect(run.code, run.output).toBe(1);
    expect(run.output).toContain(`${line}: cannot reach Postgres at 127.0.0.1:${port} (DATABASE_URL): `);
    expect(run.output).not.toContain('a-password');
    // No stack: neither as lines of text nor inside a JSON log line.
    expect(run.output).not.toMatch(/^\s+at |\\n\s+at /m);
  });
});
