import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKeyCrypto } from '../../infra/secrets/api-key-crypto.js';
import { type ConsoleHarness, type TestAccount, startConsoleHarness } from '../testing/console-harness.js';

let h: ConsoleHarness;
let admin: TestAccount;
beforeAll(async () => {
  h = await startConsoleHarness();
  admin = await h.account({ role: 10 });
});
afterAll(async () => {
  await h?.close();
});

const create = (payload: unknown, who: TestAccount = admin) =>
  h.app.inject({ method: 'POST', url: '/api/channel/', payload: payload as object, headers: who.auth });

describe('POST /api/channel/', () => {
  it('inserts the channel with its key sealed and writes one ability per group x model', async () => {
    const sub = h.redis.duplicate();
    const messages: string[] = [];
    await sub.subscribe(h.keys.invalidationChannel());
    sub.on('message', (_c, m) => messages.push(m));

    const res = await create({
      name: 'anthropic-1', base_url: 'https://api.example.com/', key: 'upstream-secret-key',
      models: 'claude-sonnet-4-5, claude-haiku-4-5', group: 'default,vip', priority: 5, weight: 3,
      model_mapping: { 'claude-sonnet': 'claude-sonnet-4-5' },
    });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({
      success: true, message: '',
      data: { name: 'anthropic-1', type: 14, base_url: 'https://api.example.com', status: 1, models: 'claude-sonnet-4-5,claude-haiku-4-5', group: 'default,vip', priority: 5, weight: 3 },
    });
    expect(res.body).not.toContain('upstream-secret-key');
    expect(body.data).not.toHaveProperty('key');
    const id = body.data.id as number;

    const [ch] = await h.sql<{ key_ciphertext: Buffer; model_mapping: string }[]>`SELECT key_ciphertext, model_mapping FROM channels WHERE id = ${id}`;
    expect(createApiKeyCrypto(h.config.KEY_SECRET).open(ch!.key_ciphertext)).toBe('upstream-secret-key');
    expect(JSON.parse(ch!.model_mapping)).toEqual({ 'claude-sonnet': 'claude-sonnet-4-5' });

    const abilities = await h.sql<{ group: string; model: string; enabled: boolean; priority: number; weight: number }[]>`
      SELECT "group", model, enabled, priority, weight FROM abilities WHERE channel_id = ${id} ORDER BY "group", model`;
    expect(abilities).toEqual([
      { group: 'default', model: 'claude-haiku-4-5', enabled: true, priority: 5, weight: 3 },
      { group: 'default', model: 'claude-sonnet-4-5', enabled: true, priority: 5, weight: 3 },
      { group: 'vip', model: 'claude-haiku-4-5', enabled: true, priority: 5, weight: 3 },
      { group: 'vip', model: 'claude-sonnet-4-5', enabled: true, priority: 5, weight: 3 },
    ]);
    await new Promise((r) => setTimeout(r, 100));
    expect(messages.map((m) => JSON.parse(m))).toContainEqual({ kind: 'channel', id });
    await sub.quit();
  });

  it('accepts models as an array, defaults the group, and disables abilities of a disabled channel', async () => {
    const res = await create({ name: 'c2', base_url: 'http://127.0.0.1:3090', key: 'k', models: ['m1', 'm2', 'm1'], status: 2 });
    expect(res.statusCode).toBe(200);
    const id = res.json().data.id;
    const rows = await h.sql<{ group: string; model: string; enabled: boolean }[]>`
      SELECT "group", model, enabled FROM abilities WHERE channel_id = ${id} ORDER BY model`;
    expect(rows).toEqual([
      { group: 'default', model: 'm1', enabled: false },
      { group: 'default', model: 'm2', enabled: false },
    ]);
  });

  it.each([
    ['no models', { models: '' }, /^models: /],
    ['a bad base_url', { base_url: 'ftp://x' }, /^base_url: /],
    ['an unknown group', { group: 'default,gold' }, /^group: unknown group "gold"/],
    ['a bad model_mapping', { model_mapping: '[1]' }, /^model_mapping: /],
    ['no key', { key: '' }, /^key: /],
  ])('refuses %s with 400', async (_l, patch, message) => {
    const res = await create({ name: 'bad', base_url: 'https://x.example', key: 'k', models: 'm', ...patch });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ success: false, message: expect.stringMatching(message) });
  });

  it('refuses an ordinary user with 403 and writes nothing', async () => {
    const user = await h.account();
    const before = await h.sql`SELECT id FROM channels`;
    const res = await create({ name: 'x', base_url: 'https://x.example', key: 'k', models: 'm' }, user);
    expect(res.statusCode).toBe(403);
    expect(await h.sql`SELECT id FROM channels`).toHaveLength(before.length);
  });
});
