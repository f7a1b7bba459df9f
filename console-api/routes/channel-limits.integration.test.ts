// Channel input bounds: the model and group lists, model_mapping and the name are bounded at the edge
// (400 naming the field, nothing stored), and every channel the bounds accept has its abilities
// stored, however many (group, model) rows it makes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ConsoleHarness, type TestAccount, startConsoleHarness, uniqueName } from '../../tests/harness/console-harness.js';

let h: ConsoleHarness;
let admin: TestAccount;
let root: TestAccount;
// Twelve groups of 1,000 models: 12,000 abilities rows, more than one INSERT of six parameters a row
// can carry (65,535 parameters: 10,922 rows).
const GROUPS = Array.from({ length: 12 }, (_, i) => (i === 0 ? 'default' : `g${i}`));
beforeAll(async () => {
  h = await startConsoleHarness();
  admin = await h.account({ role: 10 });
  root = await h.account({ role: 100 });
  const res = await h.app.inject({
    method: 'PUT', url: '/api/option/', headers: root.auth,
    payload: { key: 'GroupRatio', value: Object.fromEntries([...GROUPS, 'g'.repeat(64)].map((g) => [g, 1])) },
  });
  expect(res.statusCode, brief(res)).toBe(200);
});
afterAll(async () => {
  await h?.close();
});

// Failure messages quote the answer, cut: a refused body can be a megabyte of model names.
const brief = (res: { body: string }) => res.body.slice(0, 300);
const create = (payload: object) => h.app.inject({ method: 'POST', url: '/api/channel/', payload, headers: admin.auth });
const update = (payload: object) => h.app.inject({ method: 'PUT', url: '/api/channel/', payload, headers: admin.auth });
const models = (n: number, prefix = 'model') => Array.from({ length: n }, (_, i) => `${prefix}-${i}`);
const channelsNamed = async (name: string) => Number((await h.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM channels WHERE name = ${name}`)[0]!.n);
const abilitiesOf = async (id: number) => Number((await h.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM abilities WHERE channel_id = ${id}`)[0]!.n);
const channel = (extra: object = {}) => ({ name: uniqueName(), base_url: 'https://api.example.com', key: 'k', models: ['m1'], ...extra });

describe('channel model and group lists', () => {
  it.each([
    { what: '1,001 models', extra: { models: models(1001) }, message: 'models: must name at most 1000 models' },
    { what: '1,001 models as a comma-separated string', extra: { models: models(1001).join(',') }, message: 'models: must name at most 1000 models' },
    { what: 'a model name of 256 characters', extra: { models: ['m1', 'x'.repeat(256)] }, message: 'models: each model name must be at most 255 characters' },
    // Above about 2,700 bytes the (group, model, channel_id) key no longer fits a btree index entry.
    { what: 'a model name of 3,000 characters', extra: { models: ['y'.repeat(3000)] }, message: 'models: each model name must be at most 255 characters' },
    { what: 'a group name of 65 characters', extra: { group: ['default', 'g'.repeat(65)] }, message: 'group: each group name must be at most 64 characters' },
    { what: '101 groups', extra: { group: Array.from({ length: 101 }, (_, i) => `grp${i}`) }, message: 'group: must name at most 100 groups' },
  ])('refuses $what with 400 naming the field and stores nothing', async ({ extra, message }) => {
    const body = channel(extra);
    const res = await create(body);
    expect(res.statusCode, brief(res)).toBe(400);
    expect(res.json()).toEqual({ success: false, message });
    expect(await channelsNamed(body.name)).toBe(0);
  });

  // An array's items are comma lists too: they were counted and trimmed as whole items, then joined
  // with commas and split again when the abilities were built, so 1,000 items of 50 names each stored
  // 50,000 models, and "a, b" routed a model " b" no request names.
  it('splits array items on commas before counting: 1,000 items of two names each are 2,000 models', async () => {
    const pairs = Array.from({ length: 1000 }, (_, i) => `p${i}-a,p${i}-b`);
    const body = channel({ models: pairs });
    const res = await create(body);
    expect(res.statusCode, brief(res)).toBe(400);
    expect(res.json()).toEqual({ success: false, message: 'models: must name at most 1000 models' });
    expect(await channelsNamed(body.name)).toBe(0);

    const made = await create(channel({ models: ['m1'] }));
    const put = await update({ id: made.json().data.id, models: pairs });
    expect(put.statusCode, brief(put)).toBe(400);
    expect(put.json()).toEqual({ success: false, message: 'models: must name at most 1000 models' });
  });

  it('trims and deduplicates the names inside array items, so every stored name is one a request can match', async () => {
    const res = await create(channel({ models: ['a, b', 'c ,a', ' ,d'], group: ['default, g1'] }));
    expect(res.statusCode, brief(res)).toBe(200);
    expect(res.json().data).toMatchObject({ models: 'a,b,c,d', group: 'default,g1' });
    const rows = await h.sql<{ group: string; model: string }[]>`
      SELECT "group", model FROM abilities WHERE channel_id = ${res.json().data.id} ORDER BY "group", model`;
    expect(rows).toEqual(['default', 'g1'].flatMap((group) => ['a', 'b', 'c', 'd'].map((model) => ({ group, model }))));
  });

  it('reads a group item holding a comma as two groups, each checked against GroupRatio', async () => {
    const body = channel({ group: ['default,nosuch'] });
    const res = await create(body);
    expect(res.statusCode, brief(res)).toBe(400);
    expect(res.json()).toEqual({ success: false, message: 'group: unknown group "nosuch"' });
    expect(await channelsNamed(body.name)).toBe(0);
  });

  it('trims the names of a channel stored before the split when its abilities are next rebuilt', async () => {
    const made = await create(channel({ models: ['m1'] }));
    const id = made.json().data.id as number;
    await h.sql`UPDATE channels SET models = 'x, y' WHERE id = ${id}`;
    const put = await update({ id, priority: 3 });
    expect(put.statusCode, brief(put)).toBe(200);
    const rows = await h.sql<{ model: string }[]>`SELECT model FROM abilities WHERE channel_id = ${id} ORDER BY model`;
    expect(rows.map((r) => r.model)).toEqual(['x', 'y']);
  });

  it('refuses the same lists on update and leaves the channel and its abilities as they were', async () => {
    const made = await create(channel({ models: ['a', 'b'] }));
    expect(made.statusCode, brief(made)).toBe(200);
    const id = made.json().data.id as number;
    for (const [extra, message] of [
      [{ models: models(1001) }, 'models: must name at most 1000 models'],
      [{ models: ['z'.repeat(3000)] }, 'models: each model name must be at most 255 characters'],
      [{ group: ['h'.repeat(65)] }, 'group: each group name must be at most 64 characters'],
    ] as const) {
      const res = await update({ id, ...extra });
      expect(res.statusCode, brief(res)).toBe(400);
      expect(res.json()).toEqual({ success: false, message });
    }
    const [row] = await h.sql<{ models: string; group: string }[]>`SELECT models, "group" FROM channels WHERE id = ${id}`;
    expect(row).toEqual({ models: 'a,b', group: 'default' });
    expect(await abilitiesOf(id)).toBe(2);
  });

  it('stores 12 groups x 1,000 models (12,000 abilities rows) on create and again on update', async () => {
    const res = await create(channel({ models: models(1000), group: GROUPS }));
    expect(res.statusCode, brief(res)).toBe(200);
    const id = res.json().data.id as number;
    expect(await abilitiesOf(id)).toBe(12_000);
    const [sample] = await h.sql<{ enabled: boolean; priority: number; weight: number }[]>`
      SELECT enabled, priority, weight FROM abilities WHERE channel_id = ${id} AND "group" = 'g11' AND model = 'model-999'`;
    expect(sample).toEqual({ enabled: true, priority: 0, weight: 1 });

    const again = await update({ id, models: models(1000, 'other'), priority: 7, status: 2 });
    expect(again.statusCode, brief(again)).toBe(200);
    expect(await abilitiesOf(id)).toBe(12_000);
    const rows = await h.sql<{ model: string; enabled: boolean; priority: number }[]>`
      SELECT DISTINCT model, enabled, priority FROM abilities WHERE channel_id = ${id} AND model IN ('model-1', 'other-1')`;
    expect(rows).toEqual([{ model: 'other-1', enabled: false, priority: 7 }]);
  });

  it('stores names at the bounds: 255-character model names of three-byte characters in a 64-character group', async () => {
    const long = ['語'.repeat(255), `${'a'.repeat(254)}b`];
    const res = await create(channel({ models: long, group: ['g'.repeat(64)] }));
    expect(res.statusCode, brief(res)).toBe(200);
    const rows = await h.sql<{ group: string; model: string }[]>`
      SELECT "group", model FROM abilities WHERE channel_id = ${res.json().data.id} ORDER BY model`;
    expect(rows).toEqual([...long].sort().map((model) => ({ group: 'g'.repeat(64), model })));
  });
});

describe('channel model_mapping', () => {
  const entries = (n: number) => Object.fromEntries(models(n).map((m) => [m, `${m}-upstream`]));
  it.each([
    { what: '1,001 entries', mapping: entries(1001), message: 'model_mapping: must have at most 1000 entries' },
    { what: '1,001 entries as JSON text', mapping: JSON.stringify(entries(1001)), message: 'model_mapping: must have at most 1000 entries' },
    { what: 'a key of 256 characters', mapping: { ['k'.repeat(256)]: 'm1' }, message: 'model_mapping: each model name must be at most 255 characters' },
    { what: 'a value of 3,000 characters', mapping: JSON.stringify({ m1: 'v'.repeat(3000) }), message: 'model_mapping: each model name must be at most 255 characters' },
  ])('refuses $what with 400 and stores nothing', async ({ mapping, message }) => {
    const body = channel({ model_mapping: mapping });
    const res = await create(body);
    expect(res.statusCode, brief(res)).toBe(400);
    expect(res.json()).toEqual({ success: false, message });
    expect(await channelsNamed(body.name)).toBe(0);
  });

  it('accepts 1,000 entries', async () => {
    const res = await create(channel({ model_mapping: entries(1000) }));
    expect(res.statusCode, brief(res)).toBe(200);
    expect(Object.keys(JSON.parse(res.json().data.model_mapping))).toHaveLength(1000);
  });
});

describe('channel names are display text', () => {
  it.each(['bad\u0001name', 'bad\u001fname', 'evil\u202Etxt.exe', 'zero\u200Bwidth'])('refuses %j on create and update, storing nothing', async (name) => {
    const res = await create(channel({ name }));
    expect(res.statusCode, brief(res)).toBe(400);
    expect(res.json()).toEqual({ success: false, message: 'name: must not contain control or invisible formatting characters' });
    expect(await channelsNamed(name)).toBe(0);

    const made = await create(channel());
    const id = made.json().data.id as number;
    const put = await update({ id, name });
    expect(put.statusCode, brief(put)).toBe(400);
    expect(put.json()).toEqual({ success: false, message: 'name: must not contain control or invisible formatting characters' });
    expect(await channelsNamed(name)).toBe(0);
  });

  it('accepts names in any script, with spaces and emoji', async () => {
    for (const name of ['Anthropic 主通道', 'canal é 🚀', 'family 👨\u200D👩\u200D👧', 'می\u200Cخواهم']) {
      const res = await create(channel({ name }));
      expect(res.statusCode, brief(res)).toBe(200);
      expect(res.json().data.name).toBe(name);
    }
  });
});
