// Which groups an account may give its keys while the UserUsableGroups option is unset (the default):
// its own group plus `default` and `vip` where GroupRatio prices them, as new-api's default
// ({"default": …, "vip": …}), and `auto`. Review finding 3: every priced group was open to every
// account, so a group root added for some accounts (a cheaper `partner`) was open to all of them.
// The relay's side is relay/auth/key-rules.integration.test.ts.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type ConsoleHarness, type TestAccount, startConsoleHarness } from '../../tests/harness/console-harness.js';

let h: ConsoleHarness;
let root: TestAccount;
let plain: TestAccount;
beforeAll(async () => {
  h = await startConsoleHarness();
  root = await h.account({ role: 100 });
  plain = await h.account({ group: 'default' });
});
afterAll(async () => {
  await h?.close();
});
beforeEach(async () => {
  // Unset: GroupRatio's default {"default":1,"vip":1,"svip":1}, no UserUsableGroups.
  await h.sql`DELETE FROM options WHERE key IN ('GroupRatio', 'UserUsableGroups')`;
});

const AUTO = { ratio: 'auto', desc: 'automatic selection of an available group' };
const key = (who: TestAccount, group: string) => h.app.inject({
  method: 'POST', url: '/api/token/', headers: who.auth,
  payload: { name: `k-${group || 'own'}`, expired_time: -1, remain_quota: 0, unlimited_quota: true, group },
});
const groups = async (who: TestAccount) => {
  const res = await h.app.inject({ method: 'GET', url: '/api/user/self/groups', headers: who.auth });
  expect(res.statusCode).toBe(200);
  return res.json().data as Record<string, unknown>;
};
const refused = (group: string) => ({ success: false, message: `group: unknown group "${group}"` });
async function setOption(key: string, value: unknown): Promise<void> {
  const res = await h.putOption(root, key, value);
  expect(res.statusCode, res.body).toBe(200);
}

describe('UserUsableGroups unset', () => {
  it('lists only default, vip and auto to an account of group default, not svip', async () => {
    expect(await groups(plain)).toEqual({ default: { ratio: 1, desc: 'default' }, vip: { ratio: 1, desc: 'vip' }, auto: AUTO });
  });

  it('refuses a key in svip to an account of group default, at creation and at update, and takes default, vip, auto and ""', async () => {
    const res = await key(plain, 'svip');
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual(refused('svip'));
    for (const group of ['default', 'vip', 'auto', '']) expect((await key(plain, group)).statusCode, group).toBe(200);
    const [row] = await h.sql<{ id: number }[]>`SELECT id FROM tokens WHERE user_id = ${plain.user.id} AND "group" = 'vip'`;
    const put = await h.app.inject({ method: 'PUT', url: '/api/token/', headers: plain.auth, payload: { id: row!.id, group: 'svip' } });
    expect(put.statusCode).toBe(400);
    expect(put.json()).toEqual(refused('svip'));
    expect(await h.sql`SELECT 1 FROM tokens WHERE user_id = ${plain.user.id} AND "group" = 'svip'`).toHaveLength(0);
  });

  it('keeps a group root adds to GroupRatio to the accounts placed in it', async () => {
    await setOption('GroupRatio', { default: 1, vip: 1, svip: 1, partner: 0.5 });
    // An account of group default neither sees nor may use it.
    expect(await groups(plain)).toEqual({ default: { ratio: 1, desc: 'default' }, vip: { ratio: 1, desc: 'vip' }, auto: AUTO });
    const res = await key(plain, 'partner');
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual(refused('partner'));
    // An account placed in it sees it first and keeps using it, with default and vip; not svip.
    const partner = await h.account({ group: 'partner' });
    expect(await groups(partner)).toEqual({
      partner: { ratio: 0.5, desc: 'partner' }, default: { ratio: 1, desc: 'default' }, vip: { ratio: 1, desc: 'vip' }, auto: AUTO,
    });
    for (const group of ['partner', '', 'default', 'auto']) expect((await key(partner, group)).statusCode, group).toBe(200);
    expect((await key(partner, 'svip')).json()).toEqual(refused('svip'));
  });

  it('lists vip only while GroupRatio prices it', async () => {
    await setOption('GroupRatio', { default: 1, partner: 0.5 });
    expect(await groups(plain)).toEqual({ default: { ratio: 1, desc: 'default' }, auto: AUTO });
    expect((await key(plain, 'vip')).json()).toEqual(refused('vip'));
  });
});

describe('UserUsableGroups set', () => {
  it('keeps its meaning: the account\'s own group plus the groups it lists, svip included when listed', async () => {
    await setOption('UserUsableGroups', { svip: 'Premium' });
    expect(await groups(plain)).toEqual({ default: { ratio: 1, desc: 'default' }, svip: { ratio: 1, desc: 'Premium' }, auto: AUTO });
    expect((await key(plain, 'svip')).statusCode).toBe(200);
    expect((await key(plain, 'vip')).json()).toEqual(refused('vip'));
  });
});
