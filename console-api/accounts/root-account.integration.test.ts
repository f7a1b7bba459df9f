import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ConsoleHarness, startConsoleHarness } from '../../tests/harness/console-harness.js';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureRootAccount, rootPasswordReveal } from './root-account.js';

// Each harness has a fresh database, so "no account with role 100" holds at the start.
let h: ConsoleHarness;
beforeAll(async () => {
  h = await startConsoleHarness({ ROOT_USERNAME: 'rootadmin' });
});
afterAll(async () => {
  await h?.close();
});

describe('ensureRootAccount', () => {
  it('creates the super administrator once and prints a generated password exactly once', async () => {
    const printed: string[] = [];
    const first = await ensureRootAccount(h.sql, h.config, (l) => printed.push(l));
    expect(first).toEqual({ created: true, username: 'rootadmin', generatedPassword: true });
    expect(printed).toHaveLength(1);
    const password = /password \(shown only once\): (\S+)$/.exec(printed[0]!)?.[1];
    expect(password).toBeDefined();
    expect(password!.length).toBeGreaterThanOrEqual(20);

    const [row] = await h.sql<{ role: number; password_hash: string }[]>`SELECT role, password_hash FROM users WHERE username = 'rootadmin'`;
    expect(row!.role).toBe(100);
    expect(row!.password_hash).not.toContain(password!);

    // The generated password logs in.
    const login = await h.app.inject({ method: 'POST', url: '/api/user/login', payload: { username: 'rootadmin', password } });
    expect(login.statusCode).toBe(200);
    expect(login.json().data).toMatchObject({ username: 'rootadmin', role: 100 });

    // Later starts: nothing created, nothing printed.
    const again = await ensureRootAccount(h.sql, h.config, (l) => printed.push(l));
    expect(again).toEqual({ created: false, username: 'rootadmin', generatedPassword: false });
    expect(printed).toHaveLength(1);
    expect((await h.sql`SELECT id FROM users WHERE role = 100`).length).toBe(1);
  });

  it('uses ROOT_PASSWORD when set and prints nothing', async () => {
    await h.sql`UPDATE users SET role = 1 WHERE role = 100`;
    const printed: string[] = [];
    const res = await ensureRootAccount(h.sql, { ROOT_USERNAME: 'root2', ROOT_PASSWORD: 'given-password-123', PASSWORD_SCRYPT_LOG2N: 10 }, (l) => printed.push(l));
    expect(res).toEqual({ created: true, username: 'root2', generatedPassword: false });
    expect(printed).toEqual([]);
    const login = await h.app.inject({ method: 'POST', url: '/api/user/login', payload: { username: 'root2', password: 'given-password-123' } });
    expect(login.statusCode).toBe(200);
  });

  it('refuses to start when ROOT_USERNAME names an ordinary account', async () => {
    await h.sql`UPDATE users SET role = 1 WHERE role = 100`;
    await expect(ensureRootAccount(h.sql, { ROOT_USERNAME: 'root2', ROOT_PASSWORD: undefined, PASSWORD_SCRYPT_LOG2N: 10 }, () => {})).rejects.toThrow(/not a super administrator/);
  });
});

describe('rootPasswordReveal', () => {
  it('writes a generated password to ROOT_PASSWORD_FILE, readable by its owner only, and names only the file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'root-password-'));
    try {
      const file = join(dir, 'root-password');
      // An existing file readable by others is narrowed to its owner.
      writeFileSync(file, 'old\n', { mode: 0o644 });
      const out: string[] = [];
      rootPasswordReveal(file, (t) => out.push(t))('Root account "r" created. Generated password (shown only once): s3cret-pw', 's3cret-pw', 'r');
      expect(readFileSync(file, 'utf8')).toBe('s3cret-pw\n');
      expect(statSync(file).mode & 0o777).toBe(0o600);
      expect(out).toEqual([`Root account "r" created. Generated password written to ${file}\n`]);
      expect(out.join('')).not.toContain('s3cret-pw');
      // Without a file: the line, on stdout, once.
      const plain: string[] = [];
      rootPasswordReveal(undefined, (t) => plain.push(t))('the line', 'pw', 'r');
      expect(plain).toEqual(['the line\n']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
