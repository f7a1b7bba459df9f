// AutoGroups and UserUsableGroups name groups: each must be a group of GroupRatio (as a channel's or
// an account's group must), else every `auto` key is refused at the relay (403) with nothing telling
// the super administrator why. The reverse: GroupRatio cannot drop a group either option still names.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type ConsoleHarness, type TestAccount, startConsoleHarness } from '../../tests/harness/console-harness.js';

let h: ConsoleHarness;
let root: TestAccount;
beforeAll(async () => {
  h = await startConsoleHarness();
  // Options are root's: PUT /api/option/ refuses an administrator.
  root = await h.account({ role: 100 });
});
afterAll(async () => {
  await h?.close();
});
beforeEach(async () => {
  await h.sql`DELETE FROM options WHERE key IN ('GroupRatio', 'AutoGroups', 'UserUsableGroups', 'GroupRateLimits')`;
});

const put = (key: string, value: unknown) => h.putOption(root, key, value);
const stored = (key: string) => h.storedOption(key);

describe('PUT /api/option/ AutoGroups', () => {
  it.each([
    { value: ['nosuch'], message: 'value (AutoGroups): group "nosuch" is not a group of GroupRatio' },
    { value: ['default', 'nosuch'], message: 'value (AutoGroups): group "nosuch" is not a group of GroupRatio' },
    { value: '["auto"]', message: 'value (AutoGroups): group "auto" is not a group of GroupRatio' },
    { value: [], message: 'value (AutoGroups): must name at least one group (\'\' restores the default ["default"])' },
  ])('refuses $value with 400 and stores nothing', async ({ value, message }) => {
    const res = await put('AutoGroups', value);
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual({ success: false, message });
    expect(await stored('AutoGroups')).toBeUndefined();
  });

  it('accepts groups of GroupRatio (the default table, then a set one) and the empty text', async () => {
    expect((await put('AutoGroups', ['vip', 'default'])).statusCode).toBe(200);
    expect(JSON.parse((await stored('AutoGroups'))!)).toEqual(['vip', 'default']);
    expect((await put('GroupRatio', { default: 1, vip: 1, gold: 2 })).statusCode).toBe(200);
    expect((await put('AutoGroups', ['gold'])).statusCode).toBe(200);
    expect((await put('AutoGroups', '')).statusCode).toBe(200);
    expect(await stored('AutoGroups')).toBe('');
  });
});

describe('PUT /api/option/ UserUsableGroups', () => {
  it.each([
    { value: { nosuch: 'x' }, message: 'value (UserUsableGroups): group "nosuch" is not a group of GroupRatio' },
    { value: { default: 'Default', nosuch: 'x' }, message: 'value (UserUsableGroups): group "nosuch" is not a group of GroupRatio' },
    {
      value: { auto: 'x' },
      message: 'value (UserUsableGroups): "auto" is not listed here: every account is offered it (GET /api/user/self/groups); AutoGroups sets the groups it tries',
    },
  ])('refuses $value with 400 and stores nothing', async ({ value, message }) => {
    const res = await put('UserUsableGroups', value);
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual({ success: false, message });
    expect(await stored('UserUsableGroups')).toBeUndefined();
  });

  it('accepts groups of GroupRatio, an empty object and the empty text', async () => {
    expect((await put('UserUsableGroups', { default: 'Default', svip: 'Premium' })).statusCode).toBe(200);
    expect((await put('UserUsableGroups', {})).statusCode).toBe(200);
    expect((await put('UserUsableGroups', '')).statusCode).toBe(200);
  });

  it('a key of an account then keeps routing through auto: GET /api/user/self/groups still lists its groups', async () => {
    const member = await h.account({ group: 'vip' });
    expect((await put('UserUsableGroups', { default: 'Default' })).statusCode).toBe(200);
    const groups = await h.app.inject({ method: 'GET', url: '/api/user/self/groups', headers: member.auth });
    expect(Object.keys(groups.json().data).sort()).toEqual(['auto', 'default', 'vip']);
    await h.sql`UPDATE users SET deleted_at = 1 WHERE id = ${member.user.id}`;
  });
});

describe('PUT /api/option/ GroupRatio keeps the groups AutoGroups and UserUsableGroups name', () => {
  it('refuses to drop a group AutoGroups names, and stores nothing', async () => {
    expect((await put('AutoGroups', ['svip', 'default'])).statusCode).toBe(200);
    const res = await put('GroupRatio', { default: 1, vip: 1 });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual({ success: false, message: 'value (GroupRatio): group "svip" is named by AutoGroups; remove it there first' });
    expect(await stored('GroupRatio')).toBeUndefined();
  });

  it('refuses to drop a group UserUsableGroups names, and stores nothing', async () => {
    expect((await put('UserUsableGroups', { vip: 'VIP' })).statusCode).toBe(200);
    const res = await put('GroupRatio', { default: 1, svip: 1 });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual({ success: false, message: 'value (GroupRatio): group "vip" is named by UserUsableGroups; remove it there first' });
    expect(await stored('GroupRatio')).toBeUndefined();
  });

  it('unset AutoGroups means ["default"], which GroupRatio must keep anyway; other groups may go', async () => {
    const res = await put('GroupRatio', { default: 1 });
    expect(res.statusCode, res.body).toBe(200);
  });

  it('refuses "auto" as a group of GroupRatio: it is the automatic selection, not a group', async () => {
    const res = await put('GroupRatio', { default: 1, auto: 1 });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual({ success: false, message: 'value (GroupRatio): "auto" is the automatic selection of a group (AutoGroups), not a group' });
  });
});

describe('PUT /api/option/ GroupRateLimits', () => {
  it('refuses a limit for a group GroupRatio lacks (it would limit nobody), accepts one for a group of it; GroupRatio then keeps that group', async () => {
    const res = await put('GroupRateLimits', { VIP: { rpm: 10 } });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual({ success: false, message: 'value (GroupRateLimits): group "VIP" is not a group of GroupRatio' });
    expect(await stored('GroupRateLimits')).toBeUndefined();
    expect((await put('GroupRatio', { default: 1, vip: 1 })).statusCode).toBe(200);
    expect((await put('GroupRateLimits', { vip: { rpm: 10, tpm: 1000 } })).statusCode).toBe(200);
    const drop = await put('GroupRatio', { default: 1 });
    expect(drop.statusCode).toBe(400);
    expect(drop.json().message).toContain('group "vip" is named by GroupRateLimits');
  });
});
