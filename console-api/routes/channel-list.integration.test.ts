// GET /api/channel/: the group and status filters (new-api's); paths under /api/channel/ that are not
// endpoints (new-api's `search` and `test` without an id) answer 404 ROUTE_NOT_FOUND, not an id
// error from /api/channel/:id; a channel key of white space only is refused as an empty one.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ConsoleHarness, type TestAccount, startConsoleHarness } from '../../tests/harness/console-harness.js';

let h: ConsoleHarness;
let admin: TestAccount;
let user: TestAccount;
const ids: Record<string, number> = {};
beforeAll(async () => {
  h = await startConsoleHarness();
  admin = await h.account({ role: 10 });
  user = await h.account();
  for (const [name, group, status] of [['a', 'default', 1], ['b', 'vip,default', 2], ['c', 'svip', 3], ['d', 'vip', 1]] as const) {
    const res = await create({ name, base_url: 'https://api.example.com', key: 'k', models: 'm1', group, status });
    expect(res.statusCode, res.body).toBe(200);
    ids[name] = res.json().data.id as number;
  }
});
afterAll(async () => {
  await h?.close();
});

const create = (payload: object) => h.app.inject({ method: 'POST', url: '/api/channel/', payload, headers: admin.auth });
const get = (url: string, who: TestAccount | null = admin) => h.app.inject({ method: 'GET', url, ...(who ? { headers: who.auth } : {}) });
const names = async (url: string) => {
  const res = await get(url);
  expect(res.statusCode, res.body).toBe(200);
  return (res.json().data.items as { name: string }[]).map((c) => c.name).sort();
};

describe('GET /api/channel/ filters', () => {
  it('group: the channels whose groups include it, exactly', async () => {
    expect(await names('/api/channel/?group=vip')).toEqual(['b', 'd']);
    expect(await names('/api/channel/?group=default')).toEqual(['a', 'b']);
    expect(await names('/api/channel/?group=vi')).toEqual([]);
    expect((await get('/api/channel/?group=vip')).json().data.total).toBe(2);
  });

  it('status: 1, 2, 3, or new-api\'s enabled / disabled (2 and 3)', async () => {
    expect(await names('/api/channel/?status=1')).toEqual(['a', 'd']);
    expect(await names('/api/channel/?status=2')).toEqual(['b']);
    expect(await names('/api/channel/?status=3')).toEqual(['c']);
    expect(await names('/api/channel/?status=enabled')).toEqual(['a', 'd']);
    expect(await names('/api/channel/?status=disabled')).toEqual(['b', 'c']);
    expect(await names('/api/channel/?status=')).toEqual(['a', 'b', 'c', 'd']);
  });

  it('filters combine with each other and with keyword', async () => {
    expect(await names('/api/channel/?group=vip&status=1')).toEqual(['d']);
    expect(await names('/api/channel/?group=default&status=disabled&keyword=b')).toEqual(['b']);
  });

  it('refuses an unknown status with 400 naming it', async () => {
    const res = await get('/api/channel/?status=4');
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual({ success: false, message: 'status: must be 1 (enabled), 2, 3, enabled or disabled (2 and 3)' });
  });
});

describe('paths that are not endpoints are not ids', () => {
  it.each(['/api/channel/search', '/api/channel/search?keyword=a', '/api/channel/test', '/api/redemption/search', '/api/token/abc', '/api/user/nosuch'])(
    'GET %s: 404 ROUTE_NOT_FOUND in the envelope, with or without a credential',
    async (url) => {
      for (const who of [admin, user, null]) {
        const res = await get(url, who);
        expect(res.statusCode, res.body).toBe(404);
        expect(res.json()).toEqual({ success: false, message: 'no such endpoint' });
      }
    },
  );

  it('DELETE /api/channel/search is no endpoint either, and deletes nothing', async () => {
    const res = await h.app.inject({ method: 'DELETE', url: '/api/channel/search', headers: admin.auth });
    expect(res.statusCode, res.body).toBe(404);
    expect(res.json()).toEqual({ success: false, message: 'no such endpoint' });
    expect(await names('/api/channel/')).toEqual(['a', 'b', 'c', 'd']);
  });

  it('an id in another spelling is still an id error (400), and a real id is found', async () => {
    for (const id of ['0x1', '%2B1', '1e0', '0']) {
      const res = await get(`/api/channel/${id}`);
      expect(res.statusCode, `${id} ${res.body}`).toBe(400);
      expect(res.json().message).toMatch(/^id: must be a positive integer/);
    }
    expect((await get(`/api/channel/${ids.a}`)).json().data.name).toBe('a');
  });
});

describe('channel key of white space only', () => {
  it.each(['   ', '\t\n ', '\u3000'])('refuses %j with 400 on create and update, storing nothing', async (key) => {
    const created = await create({ name: 'blank-key', base_url: 'https://api.example.com', key, models: 'm1' });
    expect(created.statusCode, created.body).toBe(400);
    expect(created.json()).toEqual({ success: false, message: 'key: is required' });
    expect(await h.sql`SELECT 1 FROM channels WHERE name = 'blank-key'`).toHaveLength(0);

    const [before] = await h.sql<{ key_ciphertext: Buffer }[]>`SELECT key_ciphertext FROM channels WHERE id = ${ids.a!}`;
    const updated = await h.app.inject({ method: 'PUT', url: '/api/channel/', headers: admin.auth, payload: { id: ids.a, key } });
    expect(updated.statusCode, updated.body).toBe(400);
    expect(updated.json()).toEqual({ success: false, message: 'key: is required' });
    const [after] = await h.sql<{ key_ciphertext: Buffer }[]>`SELECT key_ciphertext FROM channels WHERE id = ${ids.a!}`;
    expect(after!.key_ciphertext.equals(before!.key_ciphertext)).toBe(true);
  });
});
