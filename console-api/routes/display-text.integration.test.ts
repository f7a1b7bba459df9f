// Names people read in lists (display names, API key names, redemption names) refuse control
// characters and the invisible formatting ones that make one name look like another, as usernames
// and channel names do; emoji sequences and scripts that need the zero-width joiners stay accepted.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ConsoleHarness, type TestAccount, startConsoleHarness, uniqueName } from '../../tests/harness/console-harness.js';

let h: ConsoleHarness;
let user: TestAccount;
let root: TestAccount;
beforeAll(async () => {
  h = await startConsoleHarness();
  user = await h.account();
  root = await h.account({ role: 100 });
});
afterAll(async () => {
  await h?.close();
});

const inject = (method: 'POST' | 'PUT', url: string, who: TestAccount | null, payload: object) =>
  h.app.inject({ method, url, payload, ...(who ? { headers: who.auth } : {}) });
const REFUSED = 'must not contain control or invisible formatting characters';
const BAD = ['a\u0001b', 'tab\there', 'evil\u202Etxt.exe', 'zero\u200Bwidth', 'bom\uFEFF'];
const GOOD = ['Ana María', '张伟', 'family 👨\u200D👩\u200D👧', 'می\u200Cخواهم'];

const displayName = async (id: number) => (await h.sql<{ display_name: string }[]>`SELECT display_name FROM users WHERE id = ${id}`)[0]!.display_name;

describe('display names', () => {
  it.each(BAD)('refuses %j at registration, in the own edit and in the administrator\'s, changing nothing', async (name) => {
    const username = uniqueName();
    const reg = await inject('POST', '/api/user/register', null, { username, password: 'password-123', display_name: name });
    expect(reg.statusCode, reg.body).toBe(400);
    expect(reg.json()).toEqual({ success: false, message: `display_name: ${REFUSED}` });
    expect(await h.sql`SELECT 1 FROM users WHERE username = ${username}`).toHaveLength(0);

    const before = await displayName(user.user.id);
    const self = await inject('PUT', '/api/user/self', user, { display_name: name });
    expect(self.statusCode, self.body).toBe(400);
    expect(self.json().message).toBe(`display_name: ${REFUSED}`);
    const admin = await inject('PUT', '/api/user/', root, { id: user.user.id, display_name: name });
    expect(admin.statusCode, admin.body).toBe(400);
    expect(admin.json().message).toBe(`display_name: ${REFUSED}`);
    expect(await displayName(user.user.id)).toBe(before);
  });

  it('accepts names in any script with emoji sequences', async () => {
    for (const name of GOOD) {
      const res = await inject('PUT', '/api/user/self', user, { display_name: name });
      expect(res.statusCode, res.body).toBe(200);
      expect(await displayName(user.user.id)).toBe(name);
    }
  });

  // new-api shows the username where the display name is empty; a name of spaces only would list as
  // an empty cell. At registration a blank name is the username (the default); an edit refuses it.
  it.each(['   ', ' \u3000\u00A0\t '.replace('\t', ' ')])('registration with the blank display name %j stores the username', async (name) => {
    const username = uniqueName();
    const reg = await inject('POST', '/api/user/register', null, { username, password: 'password-123', display_name: name });
    expect(reg.statusCode, reg.body).toBe(200);
    const [row] = await h.sql<{ display_name: string }[]>`SELECT display_name FROM users WHERE username = ${username}`;
    expect(row!.display_name).toBe(username);
  });

  it.each(['   ', ' \u3000 '])('refuses the blank display name %j in the own edit and in the administrator\'s, changing nothing', async (name) => {
    const before = await displayName(user.user.id);
    const self = await inject('PUT', '/api/user/self', user, { display_name: name });
    expect(self.statusCode, self.body).toBe(400);
    expect(self.json()).toEqual({ success: false, message: 'display_name: must not be empty' });
    const admin = await inject('PUT', '/api/user/', root, { id: user.user.id, display_name: name });
    expect(admin.statusCode, admin.body).toBe(400);
    expect(admin.json()).toEqual({ success: false, message: 'display_name: must not be empty' });
    expect(await displayName(user.user.id)).toBe(before);
  });

  it('an administrator cannot blank a display name the account itself could not', async () => {
    const before = await displayName(user.user.id);
    const res = await inject('PUT', '/api/user/', root, { id: user.user.id, display_name: '' });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual({ success: false, message: 'display_name: must not be empty' });
    expect(await displayName(user.user.id)).toBe(before);
  });
});

describe('API key and redemption names', () => {
  it.each(BAD)('refuses %j as a key name and as a redemption name, storing nothing', async (name) => {
    const key = await inject('POST', '/api/token/', user, { name, expired_time: -1, remain_quota: 0, unlimited_quota: true });
    expect(key.statusCode, key.body).toBe(400);
    expect(key.json()).toEqual({ success: false, message: `name: ${REFUSED}` });
    expect(await h.sql`SELECT 1 FROM tokens WHERE name = ${name}`).toHaveLength(0);

    const code = await inject('POST', '/api/redemption/', root, { name, quota: 1000 });
    expect(code.statusCode, code.body).toBe(400);
    expect(code.json()).toEqual({ success: false, message: `name: ${REFUSED}` });
    expect(await h.sql`SELECT 1 FROM redemptions WHERE name = ${name}`).toHaveLength(0);
  });

  it('accepts names in any script with emoji sequences', async () => {
    for (const name of GOOD) {
      const key = await inject('POST', '/api/token/', user, { name, expired_time: -1, remain_quota: 0, unlimited_quota: true });
      expect(key.statusCode, key.body).toBe(200);
      const code = await inject('POST', '/api/redemption/', root, { name, quota: 1000 });
      expect(code.statusCode, code.body).toBe(200);
    }
    expect(await h.sql`SELECT 1 FROM tokens WHERE user_id = ${user.user.id} AND name = ${GOOD[2]!}`).toHaveLength(1);
  });
});
