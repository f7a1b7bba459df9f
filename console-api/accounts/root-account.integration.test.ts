import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ConsoleHarness, startConsoleHarness } from '../../tests/harness/console-harness.js';
import { ensureRootAccount } from './root-account.js';

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
    const res = await ensureRootAccount(h.sql, { ROOT_USERNAME: 'root2', ROOT_PASSWORD: 'given-password-123' }, (l) => printed.push(l));
    expect(res).toEqual({ created: true, username: 'root2', generatedPassword: false });
    expect(printed).toEqual([]);
    const login = await h.app.inject({ method: 'POST', url: '/api/user/login', payload: { username: 'root2', password: 'given-password-123' } });
    expect(login.statusCode).toBe(200);
  });

  it('refuses to start when ROOT_USERNAME names an ordinary account', async () => {
    await h.sql`UPDATE users SET role = 1 WHERE role = 100`;
    await expect(ensureRootAccount(h.sql, { ROOT_USERNAME: 'root2', ROOT_PASSWORD: undefined }, () => {})).rejects.toThrow(/not a super administrator/);
  });
});
