// `make migrate` (dist/infra/migrate-main.js) when Postgres cannot be reached or refuses the session:
// one line naming the address and DATABASE_URL, never the URL's password, and exit 1. Before (review
// operator, finding 5), Node's dump of the uncaught error: pg's DatabaseError with some 20 fields, or
// the ECONNREFUSED stack, and "Node.js v20…".
import { execFile } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { projectRoot } from './project-root.js';
import { TEST_DATABASE_URL } from './testing/test-config.js';

function migrate(env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [join(projectRoot(), 'dist/infra/migrate-main.js')], { cwd: projectRoot(), env: { ...process.env, ...env }, timeout: 30_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : null) : 0, stdout, stderr });
    });
  });
}

async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('make migrate, Postgres unreachable', () => {
  it('a closed port: one line naming the address and DATABASE_URL, exit 1, the password not shown', async () => {
    const port = await closedPort();
    const r = await migrate({ DATABASE_URL: `postgres://postgres:hunter2secret@127.0.0.1:${port}/gateway_nowhere` });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`migrate: cannot connect to Postgres at 127.0.0.1:${port} (DATABASE_URL): connect ECONNREFUSED 127.0.0.1:${port}\n`);
    expect(r.stderr).not.toContain('hunter2secret');
  });

  it('a role Postgres does not have: one line with Postgres\'s reason, exit 1', async () => {
    const url = new URL(TEST_DATABASE_URL);
    url.username = 'no_such_role_migrate_test';
    url.password = 'hunter2secret';
    const r = await migrate({ DATABASE_URL: url.toString() });
    expect(r.code).toBe(1);
    const lines = r.stderr.split('\n').filter(Boolean);
    expect(lines, r.stderr).toHaveLength(1);
    expect(lines[0]).toMatch(new RegExp(`^migrate: cannot connect to Postgres at ${url.hostname}:${url.port || 5432} \\(DATABASE_URL\\): .*no_such_role_migrate_test`));
    expect(r.stderr).not.toContain('hunter2secret');
  });
});
