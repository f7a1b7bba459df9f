// A Postgres connection terminated inside a transaction must fail that transaction, not the process;
// one terminated under a statement must fail that statement, not the next one.
//
// postgres.js 3.4.9 answers the failed statement by writing its own ROLLBACK; the connection has
// closed by then, and the write, queued to a timer, dereferenced the null socket there: an uncaught
// TypeError no caller could catch (porsager/postgres #1154, #1208). The billing worker (a settlement
// batch is a transaction) and the console-api exited on it whenever `pg_terminate_backend` or a
// restart hit a busy connection. patches/postgres+3.4.9.patch guards that write (the fix of upstream
// PR #1209, made where the query is executed: a query for a closed connection fails as
// CONNECTION_CLOSED) and forgets a closed connection's unsent bytes, so that its reconnection does not
// send them ahead of its startup message. It also forgets the failed query and the error the server
// sent for it (57P01), which the reopened connection's first statement was failed with.
//
// Each case runs in a child process: the uncaught exception ends the process it happens in.
import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../project-root.js';
import { TEST_DATABASE_URL } from '../testing/test-config.js';

// The child: a transaction whose backend is terminated while its second statement runs, then a
// statement on the same pool; it prints what each gave and exits 0 if it got that far.
const IN_TRANSACTION = `
import postgres from 'postgres';
const url = process.env.DATABASE_URL;
const sql = postgres(url, { max: 1, fetch_types: false, onnotice: () => {} });
const killer = postgres(url, { max: 1, fetch_types: false, onnotice: () => {} });
let pid = null;
// The outcome is taken at once: the transaction can fail before the killer's own answer arrives,
// and a rejection nobody holds by then ends the child as an unhandled rejection.
const tx = sql.begin(async (t) => {
  const [row] = await t\`select pg_backend_pid() as pid\`;
  pid = row.pid;
  await t\`select pg_sleep(5)\`;
  return 'committed';
}).then((v) => v, (e) => 'rejected ' + (e.code ?? e.message));
while (pid === null) await new Promise((r) => setTimeout(r, 10));
await killer\`select pg_terminate_backend(\${pid})\`;
const outcome = await tx;
// The pool's one connection must open again and answer.
const [after] = await sql\`select 41 + 1 as answer, pg_backend_pid() as pid\`;
console.log(JSON.stringify({ outcome, answer: after.answer, newBackend: after.pid !== pid }));
await sql.end({ timeout: 5 });
await killer.end({ timeout: 5 });
`;

// The child: a plain statement's backend terminated while it runs, then the next statement on the
// pool's one connection.
const IN_STATEMENT = `
import postgres from 'postgres';
const url = process.env.DATABASE_URL;
const sql = postgres(url, { max: 1, fetch_types: false, onnotice: () => {} });
const killer = postgres(url, { max: 1, fetch_types: false, onnotice: () => {} });
const [{ pid }] = await sql\`select pg_backend_pid() as pid\`;
const cut = sql\`select pg_sleep(5)\`.then(() => 'completed', (e) => 'rejected ' + (e.code ?? e.message));
// The statement is running once the server says so.
while ((await killer\`select state from pg_stat_activity where pid = \${pid}\`)[0]?.state !== 'active') await new Promise((r) => setTimeout(r, 10));
await killer\`select pg_terminate_backend(\${pid})\`;
const outcome = await cut;
const next = await sql\`select 41 + 1 as answer, pg_backend_pid() as pid\`.then(([r]) => r, (e) => ({ answer: 'rejected ' + (e.code ?? e.message) }));
console.log(JSON.stringify({ outcome, answer: next.answer, newBackend: next.pid !== pid }));
await sql.end({ timeout: 5 });
await killer.end({ timeout: 5 });
`;

function runChild(source: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', source], {
      cwd: projectRoot(),
      env: { ...process.env, DATABASE_URL: TEST_DATABASE_URL },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    child.on('error', reject);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

describe('a Postgres connection terminated under a query', () => {
  it('inside a transaction rejects the transaction, and the process goes on with a new connection', async () => {
    // Three times: the ROLLBACK's write and the socket's close race, and each order must hold.
    for (let round = 0; round < 3; round++) {
      const { code, stdout, stderr } = await runChild(IN_TRANSACTION);
      expect(stderr).not.toContain('TypeError');
      expect(code, stderr).toBe(0);
      const result = JSON.parse(stdout.trim().split('\n').at(-1)!) as { outcome: string; answer: number; newBackend: boolean };
      // The statement the termination cut is what the transaction rejects with (57P01, admin shutdown).
      expect(result.outcome).toMatch(/^rejected /);
      expect(result.outcome).not.toBe('committed');
      expect(result.answer).toBe(42);
      expect(result.newBackend).toBe(true);
    }
  }, 60_000);

  it('under a statement fails that statement, and the next statement runs on a new connection', async () => {
    for (let round = 0; round < 3; round++) {
      const { code, stdout, stderr } = await runChild(IN_STATEMENT);
      expect(code, stderr).toBe(0);
      const result = JSON.parse(stdout.trim().split('\n').at(-1)!) as { outcome: string; answer: number | string; newBackend: boolean };
      expect(result.outcome).toMatch(/^rejected /);
      // Not 'rejected 57P01': the old connection's error is not the new one's.
      expect(result.answer).toBe(42);
      expect(result.newBackend).toBe(true);
    }
  }, 60_000);
});
