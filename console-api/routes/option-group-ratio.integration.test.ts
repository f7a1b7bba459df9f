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

  it('refuses a table that leaves out a group an account is in, through the route, and stores nothing', async () => {
    const member = await h.account({ group: 'vip' });
    try {
      const before = await stored();
      const res = await putRatio({ default: 1, svip: 1 });
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json()).toEqual({ success: false, message: 'value (GroupRatio): group "vip" has accounts in it; move them to another group first' });
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
      .toBe('group "vip" has accounts in it; move them to another group first');
    await h.sql`UPDATE users SET deleted_at = 1 WHERE id = ${member.user.id}`;
    expect(await optionConflict(h.sql, groupRatio, { default: 1, svip: 1 })).toBeUndefined();
  });

  it('names a group a channel is in', async () => {
    const [row] = await h.sql<{ id: number }[]>`
      INSERT INTO channels (name, base_url, key_ciphertext, models, "group") VALUES ('c', 'https://x.example', '\\x00', 'm1', 'default,svip') RETURNING id`;
    try {
      expect(await optionConflict(h.sql, groupRatio, { default: 1, vip: 1 }))
        .toBe('group "svip" has channels in it; remove it from their groups first');
      expect(await optionConflict(h.sql, groupRatio, { default: 1, svip: 1 })).toBeUndefined();
    } finally {
      await h.sql`DELETE FROM channels WHERE id = ${row!.id}`;
    }
  });

  it('finds nothing for the other options', async () => {
    expect(await optionConflict(h.sql, optionDef('ModelRatio')!, {})).toBeUndefined();
  });
});
