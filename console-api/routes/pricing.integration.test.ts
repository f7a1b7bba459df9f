// GET /api/pricing against Postgres: the models of enabled channels in the groups the account may use,
// with the ratios the relay bills by and their prices per million tokens.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ConsoleHarness, startConsoleHarness, type TestAccount, uniqueName } from '../../tests/harness/console-harness.js';
import { rebuildAbilities } from '../channels/abilities.js';

let h: ConsoleHarness;
let user: TestAccount;
let admin: TestAccount;

async function channel(group: string, models: string[], status = 1): Promise<void> {
  await h.sql.begin(async (tx) => {
    const [row] = await tx`
      INSERT INTO channels (type, name, base_url, key_ciphertext, models, "group", status)
      VALUES (14, ${uniqueName('ch')}, 'https://upstream.example', ${Buffer.from('sealed')}, ${models.join(',')}, ${group}, ${status})
      RETURNING id, status, "group", models, priority, weight`;
    await rebuildAbilities(tx, row as never);
  });
}

async function setOption(key: string, value: string): Promise<void> {
  await h.sql`INSERT INTO options (key, value) VALUES (${key}, ${value}) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`;
}

interface Entry {
  model_name: string; priced: boolean; model_ratio: number | null; completion_ratio: number | null; cache_ratio: number | null;
  input_price: number | null; output_price: number | null; cache_read_price: number | null; enable_groups: string[];
}
interface Pricing { group: string; group_ratio: Record<string, number>; models: Entry[] }

const pricing = async (who: TestAccount): Promise<Pricing> => {
  const res = await h.app.inject({ method: 'GET', url: '/api/pricing', headers: who.auth });
  expect(res.statusCode).toBe(200);
  const body = res.json() as { success: boolean; message: string; data: Pricing };
  expect(body).toMatchObject({ success: true, message: '' });
  return body.data;
};
const entry = (p: Pricing, model: string) => p.models.find((m) => m.model_name === model);

beforeAll(async () => {
  h = await startConsoleHarness();
  // default and vip are this account's (its own group and UserUsableGroups'); team is not.
  await setOption('GroupRatio', JSON.stringify({ default: 1, vip: 0.8, team: 0.5 }));
  await setOption('UserUsableGroups', JSON.stringify({ vip: 'VIP lane' }));
  await channel('default,vip', ['claude-sonnet-4-5', 'gpt-4o-mini']);
  await channel('team', ['claude-opus-4-1']);
  await channel('default', ['o3'], 2);
  await channel('vip', ['acme-unpriced-1']);
  user = await h.account({ group: 'default' });
  admin = await h.account({ role: 10 });
});
afterAll(async () => {
  await h?.close();
});

describe('GET /api/pricing', () => {
  it('lists a served model with its ratios, its dollar prices and the groups serving it', async () => {
    const p = await pricing(user);
    expect(p.group).toBe('default');
    expect(p.group_ratio).toEqual({ default: 1, vip: 0.8 });
    expect(entry(p, 'claude-sonnet-4-5')).toEqual({
      model_name: 'claude-sonnet-4-5', priced: true, model_ratio: 1.5, completion_ratio: 5, cache_ratio: 0.1,
      input_price: 3, output_price: 15, cache_read_price: 0.3, enable_groups: ['default', 'vip'],
    });
    expect(entry(p, 'gpt-4o-mini')).toMatchObject({ model_ratio: 0.075, completion_ratio: 4, cache_ratio: 0.5, input_price: 0.15, output_price: 0.6, cache_read_price: 0.075 });
    expect(p.models.map((m) => m.model_name)).toEqual([...p.models.map((m) => m.model_name)].sort());
  });

  it('leaves out a model served only in a group the account may not use, and one of a disabled channel', async () => {
    const p = await pricing(user);
    expect(entry(p, 'claude-opus-4-1')).toBeUndefined();
    expect(entry(p, 'o3')).toBeUndefined();
    // An account of that group sees it (its own group is always usable), at its own group's ratio.
    const member = await h.account({ group: 'team' });
    const q = await pricing(member);
    expect(q.group_ratio).toEqual({ team: 0.5, vip: 0.8 });
    expect(entry(q, 'claude-opus-4-1')).toMatchObject({ priced: true, input_price: 15, output_price: 75, enable_groups: ['team'] });
  });

  it('flags a served model no ratio prices, without prices', async () => {
    expect(entry(await pricing(user), 'acme-unpriced-1')).toEqual({
      model_name: 'acme-unpriced-1', priced: false, model_ratio: null, completion_ratio: null, cache_ratio: null,
      input_price: null, output_price: null, cache_read_price: null, enable_groups: ['vip'],
    });
  });

  it('reflects a ModelRatio change at once', async () => {
    const res = await h.app.inject({
      method: 'PUT', url: '/api/option/', headers: (await h.account({ role: 100 })).auth,
      payload: { key: 'ModelRatio', value: JSON.stringify({ 'claude-sonnet-4-5': 2, 'acme-unpriced-1': 0.5 }) },
    });
    expect(res.statusCode).toBe(200);
    const p = await pricing(user);
    expect(entry(p, 'claude-sonnet-4-5')).toMatchObject({ model_ratio: 2, input_price: 4, output_price: 20, cache_read_price: 0.4 });
    expect(entry(p, 'acme-unpriced-1')).toMatchObject({ priced: true, model_ratio: 0.5, input_price: 1, output_price: 5 });
  });

  it('refuses an anonymous caller with 401 in the envelope', async () => {
    const res = await h.app.inject({ method: 'GET', url: '/api/pricing' });
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ success: false, message: expect.stringContaining('not logged in') });
  });
});
