import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKeyCrypto } from '../../infra/secrets/api-key-crypto.js';
import { type ConsoleHarness, type TestAccount, startConsoleHarness } from '../../tests/harness/console-harness.js';

let h: ConsoleHarness;
let owner: TestAccount;
let other: TestAccount;
beforeAll(async () => {
  h = await startConsoleHarness();
  owner = await h.account();
  other = await h.account();
});
afterAll(async () => {
  await h?.close();
});

const future = () => Math.floor(Date.now() / 1000) + 3600;
const valid = () => ({
  name: 'my key',
  expired_time: -1,
  remain_quota: 500000,
  unlimited_quota: false,
  model_limits_enabled: true,
  model_limits: 'claude-sonnet-4-5, claude-haiku-4-5',
  allow_ips: '10.0.0.1, 192.168.0.0/16\n2001:db8::/32',
  group: 'vip',
  cross_group_retry: false,
});
const create = (payload: unknown, who: TestAccount = owner) =>
  h.app.inject({ method: 'POST', url: '/api/token/', payload: payload as object, headers: who.auth });

describe('POST /api/token/', () => {
  it('creates a key and does not return it', async () => {
    const res = await create(valid());
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ success: true, message: '' });
    expect(res.body).not.toMatch(/sk-/);
    const [row] = await h.sql<{ key_hash: Buffer; key_ciphertext: Buffer; key_mask: string; model_limits: string; allow_ips: string; group: string }[]>`
      SELECT key_hash, key_ciphertext, key_mask, model_limits, allow_ips, "group" FROM tokens WHERE user_id = ${owner.user.id}`;
    const crypto = createApiKeyCrypto(h.config.KEY_SECRET);
    const key = crypto.open(row!.key_ciphertext);
    expect(key).toMatch(/^sk-[A-Za-z0-9]{48}$/);
    expect(row!.key_hash.equals(crypto.hash(key))).toBe(true);
    expect(row!.key_mask).toBe(`${key.slice(0, 7)}********${key.slice(-4)}`);
    expect(row).toMatchObject({ model_limits: 'claude-sonnet-4-5,claude-haiku-4-5', allow_ips: '10.0.0.1,192.168.0.0/16,2001:db8::/32', group: 'vip' });
  });

  it('accepts an expiry of 9999-12-31 23:59:59 UTC, the latest date it stores', async () => {
    const someone = await h.account();
    const res = await create({ ...valid(), name: 'far expiry', expired_time: 253_402_300_799 }, someone);
    expect(res.statusCode, res.body).toBe(200);
    const [row] = await h.sql<{ expired_time: string }[]>`SELECT expired_time::text FROM tokens WHERE user_id = ${someone.user.id} AND name = 'far expiry'`;
    expect(row!.expired_time).toBe('253402300799');
  });

  it('accepts the minimal input, unlimited keys, a future expiry, the auto group and null allow_ips', async () => {
    const res = await create({ name: 'm', expired_time: future(), remain_quota: 0, unlimited_quota: true, group: 'auto', allow_ips: null, cross_group_retry: true });
    expect(res.statusCode).toBe(200);
    expect((await create({ name: 'x', expired_time: -1, remain_quota: 0, unlimited_quota: false, group: '' })).statusCode).toBe(200);
  });

  it.each([
    ['name of 51 characters', { name: 'x'.repeat(51) }, /^name: must be at most 50 characters/],
    ['unknown group', { group: 'platinum' }, /^group: unknown group "platinum"/],
    ['bad ip', { allow_ips: '10.0.0.1, 300.1.1.1' }, /^allow_ips: "300\.1\.1\.1" is not an IP address or CIDR block/],
    ['bad cidr', { allow_ips: '10.0.0.0/33' }, /^allow_ips: /],
    ['past expiry', { expired_time: 1000 }, /^expired_time: /],
    ['expiry below -1', { expired_time: -2 }, /^expired_time: /],
    ['fractional expiry', { expired_time: 1.5 }, /^expired_time: must be an integer/],
    ['negative quota', { remain_quota: -1 }, /^remain_quota: must be at least 0/],
    ['fractional quota', { remain_quota: 0.5 }, /^remain_quota: must be an integer/],
    ['string unlimited_quota', { unlimited_quota: 'true' }, /^unlimited_quota: must be a boolean/],
    ['missing name', { name: undefined }, /^name: /],
    // The contract marks name required: neither empty nor blank, as a redemption code's.
    ['empty name', { name: '' }, /^name: is required$/],
    ['blank name', { name: ' \u3000 ' }, /^name: is required$/],
    // A date the web console can show: at most 9999-12-31 23:59:59 UTC (above it, "NaN-NaN-NaN").
    ['expiry past 9999-12-31', { expired_time: 253_402_300_800 }, /^expired_time: must be at most 253402300799 \(9999-12-31 23:59:59 UTC\)$/],
    ['expiry of 2^53 - 1', { expired_time: Number.MAX_SAFE_INTEGER }, /^expired_time: must be at most 253402300799/],
    ['array model_limits', { model_limits: ['a'] }, /^model_limits: /],
    ['numeric allow_ips', { allow_ips: 5 }, /^allow_ips: /],
  ])('refuses %s with 400 naming the field', async (_label, patch, message) => {
    const res = await create({ ...valid(), ...patch });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ success: false, message: expect.stringMatching(message) });
  });
});

describe('GET /api/token/ and POST /api/token/:id/key', () => {
  it('lists the owner\'s keys masked, paged, newest first, without hash or ciphertext', async () => {
    const res = await h.app.inject({ method: 'GET', url: '/api/token/?p=1&page_size=2', headers: owner.auth });
    expect(res.statusCode).toBe(200);
    const { data } = res.json();
    expect(data).toMatchObject({ total: 3, page: 1, page_size: 2 });
    expect(data.items).toHaveLength(2);
    expect(data.items[0].id).toBeGreaterThan(data.items[1].id);
    for (const item of data.items) {
      expect(item.key).toMatch(/^sk-[A-Za-z0-9]{4}\*{8}[A-Za-z0-9]{4}$/);
      expect(item).not.toHaveProperty('key_hash');
      expect(item).not.toHaveProperty('key_ciphertext');
      expect(item.user_id).toBe(owner.user.id);
    }
    const page2 = (await h.app.inject({ method: 'GET', url: '/api/token/?p=2&page_size=2', headers: owner.auth })).json().data;
    expect(page2.items).toHaveLength(1);
    expect(page2.items[0]).toMatchObject({ name: 'my key', remain_quota: 500000, unlimited_quota: false, expired_time: -1, group: 'vip' });
    const none = (await h.app.inject({ method: 'GET', url: '/api/token/', headers: other.auth })).json().data;
    expect(none).toEqual({ items: [], total: 0, page: 1, page_size: 10 });
  });

  it('reveals the full key to the owner only; another account gets 404', async () => {
    const list = (await h.app.inject({ method: 'GET', url: '/api/token/', headers: owner.auth })).json().data;
    const item = list.items[0];
    const res = await h.app.inject({ method: 'POST', url: `/api/token/${item.id}/key`, headers: owner.auth });
    expect(res.statusCode).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    const key = res.json().data.key as string;
    expect(key).toMatch(/^sk-[A-Za-z0-9]{48}$/);
    expect(`${key.slice(0, 7)}********${key.slice(-4)}`).toBe(item.key);

    const stranger = await h.app.inject({ method: 'POST', url: `/api/token/${item.id}/key`, headers: other.auth });
    expect(stranger.statusCode).toBe(404);
    expect(stranger.json()).toEqual({ success: false, message: 'API key not found' });
    expect(stranger.body).not.toContain(key.slice(3));
    expect((await h.app.inject({ method: 'POST', url: '/api/token/abc/key', headers: owner.auth })).statusCode).toBe(400);
  });

  it('needs an access token', async () => {
    expect((await h.app.inject({ method: 'GET', url: '/api/token/' })).statusCode).toBe(401);
    const key = (await h.app.inject({ method: 'POST', url: '/api/token/1/key', headers: { authorization: 'Bearer sk-whatever' } }));
    expect(key.statusCode).toBe(401);
  });
});

describe('key management: get, search, update, delete', () => {
  const put = (payload: unknown, query = '', who: TestAccount = owner) =>
    h.app.inject({ method: 'PUT', url: `/api/token/${query}`, payload: payload as object, headers: who.auth });
  const list = async (query: string, who: TestAccount = owner) =>
    (await h.app.inject({ method: 'GET', url: `/api/token/${query}`, headers: who.auth })).json().data;

  it('gets one key masked and searches by name', async () => {
    await create({ ...valid(), name: 'searchable alpha' });
    const found = await list('?keyword=alpha');
    expect(found.total).toBe(1);
    const id = found.items[0].id as number;
    const one = await h.app.inject({ method: 'GET', url: `/api/token/${id}`, headers: owner.auth });
    expect(one.statusCode).toBe(200);
    expect(one.json().data).toMatchObject({ id, name: 'searchable alpha', key: expect.stringMatching(/^sk-\w{4}\*{8}\w{4}$/) });
    expect((await h.app.inject({ method: 'GET', url: `/api/token/${id}`, headers: other.auth })).statusCode).toBe(404);
    expect((await h.app.inject({ method: 'GET', url: '/api/token/search?keyword=ALPHA', headers: owner.auth })).json().data.total).toBe(1);
  });

  it('shows an enabled key past its expiry as 3 (expired) and a limited one with no quota left as 4 (exhausted), as new-api does', async () => {
    await create({ ...valid(), name: 'status expired', expired_time: -1 });
    await create({ ...valid(), name: 'status exhausted', unlimited_quota: false, remain_quota: 0 });
    await create({ ...valid(), name: 'status disabled', expired_time: -1 });
    await h.sql`UPDATE tokens SET expired_time = 1000 WHERE user_id = ${owner.user.id} AND name IN ('status expired', 'status disabled')`;
    await h.sql`UPDATE tokens SET status = 2 WHERE user_id = ${owner.user.id} AND name = 'status disabled'`;
    const items = (await list('?keyword=status')).items as { name: string; status: number; id: number }[];
    expect(Object.fromEntries(items.map((k) => [k.name, k.status]))).toEqual({ 'status expired': 3, 'status exhausted': 4, 'status disabled': 2 });
    const one = await h.app.inject({ method: 'GET', url: `/api/token/${items.find((k) => k.name === 'status expired')!.id}`, headers: owner.auth });
    expect(one.json().data.status).toBe(3);
  });

  it('takes the whole key back with only its name changed, past expiry and a group no longer offered included (new-api\'s edit form)', async () => {
    await create({ ...valid(), name: 'whole form', group: 'vip' });
    const id = (await list('?keyword=whole')).items[0].id as number;
    await h.sql`UPDATE tokens SET expired_time = 1000 WHERE id = ${id}`;
    await h.sql`INSERT INTO options (key, value) VALUES ('UserUsableGroups', '{"default":"Default"}') ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`;
    try {
      const form = (await h.app.inject({ method: 'GET', url: `/api/token/${id}`, headers: owner.auth })).json().data;
      const { key: _, status: __, used_quota: ___, created_time: ____, accessed_time: _____, user_id: ______, ...fields } = form;
      const renamed = await put({ ...fields, name: 'whole form edited' });
      expect(renamed.statusCode, renamed.body).toBe(200);
      expect(renamed.json().data).toMatchObject({ name: 'whole form edited', expired_time: 1000, group: 'vip', status: 3 });
      // What does change is still checked.
      expect((await put({ id, expired_time: 2000 })).json().message).toMatch(/^expired_time: /);
      expect((await put({ id, group: 'svip' })).json().message).toBe('group: unknown group "svip"');
    } finally {
      await h.sql`DELETE FROM options WHERE key = 'UserUsableGroups'`;
    }
  });

  it('updates fields, moves the key mirror by the remain_quota delta, and publishes the change', async () => {
    const id = (await list('?keyword=alpha')).items[0].id as number;
    await h.redis.set(h.keys.tokenRemain(owner.user.id, id), 400_000); // loaded: 100000 reserved
    const sub = h.redis.duplicate();
    const messages: unknown[] = [];
    await sub.subscribe(h.keys.invalidationChannel());
    sub.on('message', (_c, m) => messages.push(JSON.parse(m)));

    // From vip to default: groups the owner (of group default) may use while UserUsableGroups is unset.
    const res = await put({ id, name: 'renamed', remain_quota: 800_000, group: 'default', allow_ips: '', model_limits: 'a, b, a' });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().data).toMatchObject({ id, name: 'renamed', remain_quota: 800_000, group: 'default', allow_ips: null, model_limits: 'a,b', unlimited_quota: false });
    expect(await h.quotaStore.tokenRemain(owner.user.id, id)).toBe(700_000);

    const off = await put({ id, status: 2, name: 'ignored' }, '?status_only=true');
    expect(off.json().data).toMatchObject({ status: 2, name: 'renamed' });
    expect((await put({ id }, '?status_only=true')).json().message).toBe('status: is required with status_only=true');
    expect((await put({ id, status: 3 })).json().message).toMatch(/^status: /);
    expect((await put({ id, group: 'gold' })).statusCode).toBe(400);
    expect((await put({ id, name: 'x'.repeat(51) })).json().message).toBe('name: must be at most 50 characters');
    for (const name of ['', '   ']) {
      const blank = await put({ id, name });
      expect(blank.statusCode).toBe(400);
      expect(blank.json()).toEqual({ success: false, message: 'name: is required' });
    }
    expect((await put({ id, expired_time: Number.MAX_SAFE_INTEGER })).json().message).toMatch(/^expired_time: must be at most 253402300799/);
    expect((await put({ id, name: 'stolen' }, '', other)).statusCode).toBe(404);
    // An expired key cannot be re-enabled without a later expiry.
    await h.sql`UPDATE tokens SET expired_time = 1000 WHERE id = ${id}`;
    expect((await put({ id, status: 1 })).json().message).toMatch(/^status: the key has expired/);
    expect((await put({ id, status: 1, expired_time: -1 })).json().data).toMatchObject({ status: 1, expired_time: -1 });
    await new Promise((r) => setTimeout(r, 100));
    await sub.quit();
    expect(messages).toContainEqual({ kind: 'token', id, user_id: owner.user.id });
  });

  it('refuses a remain_quota set from a stale reading (expected_remain_quota), so spending billed meanwhile is not handed back', async () => {
    await create({ ...valid(), name: 'stale quota', remain_quota: 1000 });
    const form = (await list('?keyword=stale')).items[0];
    const id = form.id as number;
    // The billing worker settles 600 after the form was loaded: Postgres and the key mirror both at 400.
    await h.sql`UPDATE tokens SET remain_quota = remain_quota - 600 WHERE id = ${id}`;
    await h.redis.set(h.keys.tokenRemain(owner.user.id, id), 400);
    const edits = async () => Number((await h.sql<{ n: string }[]>`SELECT count(*) AS n FROM key_quota_edits WHERE token_id = ${id}`)[0]!.n);

    const stale = await put({ id, name: 'renamed', remain_quota: 1000, unlimited_quota: false, expected_remain_quota: 1000 });
    expect(stale.statusCode, stale.body).toBe(409);
    expect(stale.json()).toEqual({ success: false, message: 'remain_quota: the key\'s quota changed since it was read (now 400 quota); read it again' });
    const [row] = await h.sql<{ name: string; remain_quota: number }[]>`SELECT name, remain_quota FROM tokens WHERE id = ${id}`;
    expect(row).toEqual({ name: 'stale quota', remain_quota: 400 });
    expect(await edits()).toBe(0);
    expect(await h.quotaStore.tokenRemain(owner.user.id, id)).toBe(400);

    const fresh = await put({ id, name: 'relabelled', remain_quota: 1000, expected_remain_quota: 400 });
    expect(fresh.statusCode, fresh.body).toBe(200);
    expect(fresh.json().data).toMatchObject({ name: 'relabelled', remain_quota: 1000 });
    expect(await edits()).toBe(1);
    expect(await h.quotaStore.tokenRemain(owner.user.id, id)).toBe(1000);
    // Without remain_quota the quota is not touched, expected_remain_quota or not; without
    // expected_remain_quota remain_quota is set as sent (new-api's clients).
    expect((await put({ id, name: 'again', expected_remain_quota: 1 })).statusCode).toBe(200);
    expect((await put({ id, remain_quota: 700 })).json().data).toMatchObject({ name: 'again', remain_quota: 700 });
    expect((await put({ id, remain_quota: 700, expected_remain_quota: -1 })).json().message).toMatch(/^expected_remain_quota: /);
  });

  it('refuses lowering a limited key below what its requests in flight hold, as an account\'s balance', async () => {
    const funded = await h.account({ quota: 1_000_000 });
    const res = await h.app.inject({ method: 'POST', url: '/api/token/', headers: funded.auth, payload: { ...valid(), name: 'in flight', remain_quota: 1000, group: 'default' } });
    expect(res.statusCode, res.body).toBe(200);
    const [key] = await h.sql<{ id: string }[]>`SELECT id FROM tokens WHERE user_id = ${funded.user.id} AND name = 'in flight'`;
    const id = Number(key!.id);
    // A request of the key in flight holds 700 of its 1,000 (the relay's reservation).
    const held = await h.quotaStore.reserve({ userId: funded.user.id, tokenId: id, tokenLimited: true, requestId: 'in-flight-1', amount: 700, deadlineMs: Date.now() + 60_000 });
    expect(held).toBe('reserved');
    const edit = (remain: number) => h.app.inject({ method: 'PUT', url: '/api/token/', headers: funded.auth, payload: { id, remain_quota: remain, expected_remain_quota: 1000 } });
    for (const remain of [1, 299]) {
      const refused = await edit(remain);
      expect(refused.statusCode, refused.body).toBe(400);
      expect(refused.json().message).toBe('remain_quota: would make the key\'s remaining quota negative: its requests in flight or not yet billed hold 700 of it (spendable 300, Postgres 1000); lower it by at most 300, or disable the key');
    }
    const [kept] = await h.sql<{ remain_quota: string }[]>`SELECT remain_quota FROM tokens WHERE id = ${id}`;
    expect(Number(kept!.remain_quota)).toBe(1000);
    expect(await h.quotaStore.tokenRemain(funded.user.id, id)).toBe(300);
    // Emptied (0): what is spendable is removed, the mirror at 0, never below; what the request in
    // flight holds stays until it settles (review lifecycle: refused for as long as the key had traffic).
    const emptied = await edit(0);
    expect(emptied.statusCode, emptied.body).toBe(200);
    expect(emptied.json().data).toMatchObject({ remain_quota: 700 });
    expect(await h.quotaStore.tokenRemain(funded.user.id, id)).toBe(0);
    // It settles at 250: its unspent 450 is what the key has left, in Postgres (once billed) and the mirror.
    expect(await h.quotaStore.settle({ userId: funded.user.id, tokenId: id, requestId: 'in-flight-1', cost: 250, eventJson: '{}', limited: true })).toBe(true);
    expect(await h.quotaStore.tokenRemain(funded.user.id, id)).toBe(450);
    // Raised, or lowered on an unlimited key, is never refused.
    expect((await h.app.inject({ method: 'PUT', url: '/api/token/', headers: funded.auth, payload: { id, remain_quota: 5000 } })).statusCode).toBe(200);
    expect((await h.app.inject({ method: 'PUT', url: '/api/token/', headers: funded.auth, payload: { id, remain_quota: 0, unlimited_quota: true } })).statusCode).toBe(200);
  });

  it('deletes softly: gone from lists and reveal, row kept with deleted_at', async () => {
    const id = (await list('?keyword=renamed')).items[0].id as number;
    expect((await h.app.inject({ method: 'DELETE', url: `/api/token/${id}`, headers: other.auth })).statusCode).toBe(404);
    const del = await h.app.inject({ method: 'DELETE', url: `/api/token/${id}`, headers: owner.auth });
    expect(del.json()).toEqual({ success: true, message: '' });
    expect((await list('?keyword=renamed')).total).toBe(0);
    expect((await h.app.inject({ method: 'POST', url: `/api/token/${id}/key`, headers: owner.auth })).statusCode).toBe(404);
    const [row] = await h.sql<{ deleted_at: number | null }[]>`SELECT deleted_at FROM tokens WHERE id = ${id}`;
    expect(row!.deleted_at).toBeGreaterThan(0);
    expect((await h.app.inject({ method: 'DELETE', url: `/api/token/${id}`, headers: owner.auth })).statusCode).toBe(404);
  });
});
