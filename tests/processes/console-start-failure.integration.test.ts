// The console-api started while Postgres does not answer: one line naming DATABASE_URL and the
// address (never its user information), exit 1 for its supervisor to start it again. Before: "Error:
// connect ECONNREFUSED" with its stack, naming no variable (review operator, finding 5).
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../../infra/project-root.js';
import { freePort } from '../../infra/testing/free-port.js';

describe('the console-api started without its Postgres', () => {
  it('says so in one line naming DATABASE_URL and exits 1', async () => {
    const port = await freePort();
    const env = {
      ...process.env,
      NODE_ENV: 'test', KEY_SECRET: 'test-secret-0123456789abcdef', CONSOLE_HOST: '127.0.0.1', CONSOLE_PORT: '0',
      DATABASE_URL: `postgres://postgres:a-password@127.0.0.1:${port}/gateway`, REDIS_PREFIX: 'console-start-failure',
    };
    const run = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      execFile(process.execPath, [join(projectRoot(), 'dist/console-api/main.js')], { cwd: projectRoot(), env, timeout: 30_000 }, (err, _stdout, stderr) => {
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : null) : 0, stderr });
      });
    });
    expect(run.code, run.stderr).toBe(1);
    expect(run.stderr).toContain(`console-api failed to start: cannot reach Postgres at 127.0.0.1:${port} (DATABASE_URL): `);
    expect(run.stderr).not.toContain('a-password');
    expect(run.stderr).not.toMatch(/^\s+at /m);
  });
});
