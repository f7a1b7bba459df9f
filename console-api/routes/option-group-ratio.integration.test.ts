// The GroupRatio option: its keys are the groups accounts and channels are placed in, so it keeps
// `default`, its group names are bounded, and (optionConflict) it keeps every group in use.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ConsoleHarness, type TestAccount, startConsoleHarness } from '../../tests/harness/console-harness.js';
import { optionConflict, optionDef } from '../options/option-catalogue.js';

let h: ConsoleHarness;
let admin: TestAccount;
let root: TestAccount;
beforeAll(async () => {
  h = await startConsoleHarness();
  admin = await h.account({ role: 10 });
  root = await h.account({ role: 100 });
});
afterAll(async () => {
  await h?.close();
});

// Options are root's (PUT /api/option/ refuses an administrator); accounts are edited by an administrator.
const putRatio = (value: unknown) => h.putOption(root, 'GroupRatio', value);
const stored = () => h.storedOption('GroupRatio');

describe('PUT /api/option/ GroupRatio', () => {
  it.each([
    { what: 'an empty table', value: {} },
    { what: 'a table without default', value: { vip: 1, svip: 2 } },
    { what: 'the same as JSON text', value: '{"vip":1}' },
  ])('refuses $what with 400 naming default, stores nothing, and accounts in default stay editable', async ({ value }) => {
    const before = await stored();
    const res = await putRatio(value);
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual({ success: false, message: 'value (GroupRatio): must keep the group "default" (new accounts are placed in it)' });
    expect(await stored()).toBe(before);

    const member = await h.account();
    const edit = await h.app.inject({ method: 'PUT', url: '/api/user/', headers: admin.auth, payload: { id: member.user.id, group: 'default', display_name: 'still here' } });
    expect(edit.statusCode, edit.body).toBe(200);
  });

  it.each([
    { name: 'g'.repeat(65), shown: `${'g'.repeat(20)}…` },
    { name: '', shown: '' },
  ])('refuses a group name of $name.length characters with 400', async ({ name, shown }) => {
    const before = await stored();
    const res = await putRatio({ default: 1, [name]: 1 });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual({ success: false, message: `value (GroupRatio): a group name must be 1 to 64 characters ("${shown}")` });
    expect(await stored()).toBe(before);
  });

  // A channel's groups are stored comma-separated and trimmed: a group "a,b" became abilities in
  // groups "a" and "b", and a group " x " could hold accounts but never a channel ("x" is unknown).
  it.each([
    { name: 'a,b', message: 'a group name must not contain a comma (channels list their groups comma-separated) ("a,b")' },
    { name: ',', message: 'a group name must not contain a comma (channels list their groups comma-separated) (",")' },
    { name: ' x', message: 'a group name must not start or end with white space (" x")' },
    { name: 'x ', message: 'a group name must not start or end with white space ("x ")' },
    { name: '\tvip', message: 'a group name must not start or end with white space ("\tvip")' },
    { name: ' ', message: 'a group name must not start or end with white space (" ")' },
    // Before: 500 (Postgres's jsonb refuses NUL in the check of the groups in use).
    { name: 'x\u0000y', message: 'a group name must not contain a control character or half a surrogate pair ("x\\u0000y")' },
    { name: 'a\nb', message: 'a group name must not contain a control character or half a surrogate pair ("a\\nb")' },
    // Half a surrogate pair: 500 from the same jsonb cast (review of the session's change).
    { name: 'x\ud800', message: 'a group name must not contain a control character or half a surrogate pair ("x\\ud800")' },
  ])('refuses the group name $name with 400 and stores nothing', async ({ name, message }) => {
    const before = await stored();
    // As the console sends it: the table as JSON text (a NUL in it escaped, past the body's own checks).
    const res = await putRatio(JSON.stringify({ default: 1, vip: 1, svip: 1, [name]: 0.5 }));
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual({ success: false, message: `value (GroupRatio): ${message}` });
    expect(await stored()).toBe(before);
  });

  it('accepts a group name with inner spaces and other punctuation', async () => {
    const res = await putRatio({ default: 1, vip: 1, svip: 1, 'team a': 1, 'b-2.x_y': 1 });
    expect(res.statusCode, res.body).toBe(200);
    expect(await putRatio({ default: 1, vip: 1, svip: 1 })).toMatchObject({ statusCode: 200 });
  });

  it('refuses a table that leaves out a group an account is in, through the route, and stores nothing', async () => {
    const member = await h.account({ group: 'vip' });
    try {
      const before = await stored();
      const res = await putRatio({ default: 1, svip: 1 });
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json()).toEqual({ success: false, message: 'value (GroupRatio): group "vip" is used by 1 account, 0 channels and 0 API keys; move the accounts and channels to another group first' });
      expect(await stored()).toBe(before);
    } finally {
      await h.sql`UPDATE users SET deleted_at = 1 WHERE id = ${member.user.id}`;
    }
  });

  it('accepts default with other groups of up to 64 characters', async () => {
    const value = { default: 1, vip: 0.8, ['g'.repeat(64)]: 2 };
    const res = await putRatio(value);
    expect(res.statusCode, res.body).toBe(200);
    expect(JSON.parse((await stored())!)).toEqual(value);
  });
});

describe('optionConflict: GroupRatio keeps the groups in use', () => {
  const groupRatio = optionDef('GroupRatio')!;

  it('names a group a live account is in, and not one only a deleted account was in', async () => {
    const member = await h.account({ group: 'vip' });
    expect(await optionConflict(h.sql, groupRatio, { default: 1, svip: 1 }))
      .toBe('group "vip" is used by 1 account, 0 channels and 0 API keys; move the accounts and channels to another group first');
    await h.sql`UPDATE users SET deleted_at = 1 WHERE id = ${member.user.id}`;
    expect(await optionConflict(h.sql, groupRatio, { default: 1, svip: 1 })).toBeUndefined();
  });

  it('names a group a channel is in', async () => {
    const [row] = await h.sql<{ id: number }[]>`
      INSERT INTO channels (name, base_url, key_ciphertext, models, "group") VALUES ('c', 'https://x.example', '\\x00', 'm1', 'default,svip') RETURNING id`;
    try {
      expect(await optionConflict(h.sql, groupRatio, { default: 1, vip: 1 }))
        .toBe('group "svip" is used by 0 accounts, 1 channel and 0 API keys; move the accounts and channels to another group first');
      expect(await optionConflict(h.sql, groupRatio, { default: 1, svip: 1 })).toBeUndefined();
    } finally {
      await h.sql`DELETE FROM channels WHERE id = ${row!.id}`;
    }
  });

  // The refusal counts what an operator has to move, so one answer tells how big the job is. API keys
  // are counted but do not refuse the drop: no administrator can edit another account's key, so any
  // account naming a group in a key could otherwise keep root from ever removing that group.
  it('counts the live accounts, the channels and the live API keys of the group it refuses to drop', async () => {
    expect((await putRatio({ default: 1, vip: 1, svip: 1, team: 1 })).statusCode).toBe(200);
    const a = await h.account({ group: 'team' });
    const b = await h.account({ group: 'team' });
    const gone = await h.account({ group: 'team' });
    const key = (who: TestAccount, name: string) => h.app.inject({
      method: 'POST', url: '/api/token/', headers: who.auth,
      payload: { name, expired_time: -1, remain_quota: 0, unlimited_quota: true, group: 'team' },
    });
    for (const [who, name] of [[a, 'k1'], [a, 'k2'], [b, 'k3'], [gone, 'k4']] as const) {
      expect((await key(who, name)).statusCode).toBe(200);
    }
    // Neither a deleted key nor the keys of a deleted account count.
    await h.sql`UPDATE tokens SET deleted_at = 1 WHERE user_id = ${b.user.id}`;
    await h.sql`UPDATE users SET deleted_at = 1 WHERE id = ${gone.user.id}`;
    const [channel] = await h.sql<{ id: number }[]>`
      INSERT INTO channels (name, base_url, key_ciphertext, models, "group") VALUES ('c', 'https://x.example', '\\x00', 'm1', 'default,team') RETURNING id`;
    try {
      const before = await stored();
      const res = await putRatio({ default: 1, vip: 1, svip: 1 });
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json()).toEqual({
        success: false,
        message: 'value (GroupRatio): group "team" is used by 2 accounts, 1 channel and 2 API keys; move the accounts and channels to another group first',
      });
      expect(await stored()).toBe(before);

      // Accounts and channels moved: the keys alone do not hold the group (the relay refuses them,
      // 403, as a key naming a group its account may no longer use, until their owner picks another).
      await h.sql`DELETE FROM channels WHERE id = ${channel!.id}`;
      for (const who of [a, b]) {
        const moved = await h.app.inject({ method: 'POST', url: '/api/user/manage', headers: admin.auth, payload: { id: who.user.id, action: 'set_group', group: 'default' } });
        expect(moved.statusCode, moved.body).toBe(200);
      }
      const dropped = await putRatio({ default: 1, vip: 1, svip: 1 });
      expect(dropped.statusCode, dropped.body).toBe(200);
    } finally {
      await h.sql`DELETE FROM channels WHERE id = ${channel!.id}`;
      await h.sql`UPDATE users SET deleted_at = 1 WHERE id IN (${a.user.id}, ${b.user.id})`;
    }
  });

  it('finds nothing for the other options', async () => {
    expect(await optionConflict(h.sql, optionDef('ModelRatio')!, {})).toBeUndefined();
  });
});
