import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ConsoleHarness, type TestAccount, startConsoleHarness } from '../../tests/harness/console-harness.js';
import { freePort } from '../../infra/testing/free-port.js';

let h: ConsoleHarness;
let me: TestAccount;
let someoneElse: TestAccount;
const now = Math.floor(Date.now() / 1000);
let nextId = 0;

function row(user: TestAccount, over: Record<string, unknown>) {
  return {
    id: ++nextId + Math.floor(Math.random() * 1e9) * 1000,
    user_id: user.user.id,
    created_at: now,
    type: 2,
    content: 'model ratio 1.5, group ratio 1',
    username: user.user.username,
    token_name: 'k1',
    model_name: 'm1',
    quota: 0,
    prompt_tokens: 0,
    completion_tokens: 0,
    use_time: 2,
    is_stream: false,
    channel: 3,
    token_id: 7,
    group: 'default',
    request_id: `req-${nextId}`,
    upstream_request_id: '',
    ...over,
  };
}

// The contract's log entry: every field and its JSON type.
const LOG_FIELDS: Record<string, 'number' | 'string' | 'boolean'> = {
  id: 'number', user_id: 'number', created_at: 'number', type: 'number', content: 'string', username: 'string',
  token_name: 'string', model_name: 'string', quota: 'number', prompt_tokens: 'number', completion_tokens: 'number',
  use_time: 'number', is_stream: 'boolean', channel: 'number', token_id: 'number', group: 'string',
  request_id: 'string', upstream_request_id: 'string',
  // Additive to the contract: which API the request came in by (ClickHouse migration 005).
  protocol: 'string',
};

let r1: ReturnType<typeof row>;
let r2: ReturnType<typeof row>;
let r3: ReturnType<typeof row>;
let r4: ReturnType<typeof row>;
let r5: ReturnType<typeof row>;

beforeAll(async () => {
  h = await startConsoleHarness();
  me = await h.account();
  someoneElse = await h.account();
  r1 = row(me, { created_at: now - 30, quota: 100, prompt_tokens: 10, completion_tokens: 5, is_stream: true, request_id: 'req-1', upstream_request_id: 'up-1', protocol: 'openai' });
  r2 = row(me, { created_at: now - 20, quota: 200, prompt_tokens: 20, completion_tokens: 10, model_name: 'm2', token_name: 'k2', group: 'vip', channel: 4, request_id: 'req-2' });
  r3 = row(me, { created_at: now - 3600, quota: 400, prompt_tokens: 100, completion_tokens: 100, request_id: 'req-3' });
  r4 = row(me, { created_at: now - 10, type: 1, quota: 10_000, token_name: '', model_name: '', request_id: 'req-4', content: 'top-up' });
  r5 = row(me, { created_at: now - 5, type: 5, quota: 0, request_id: 'req-5', content: 'upstream error' });
  const batch = [r1, r2, r3, r4, r5, row(someoneElse, { created_at: now - 15, quota: 999, prompt_tokens: 1000 })];
  // The billing worker sends the batch again with its token (its delete was lost): ClickHouse drops it.
  const token = `log-outbox-${randomUUID()}`;
  for (let i = 0; i < 2; i++) {
    await h.clickhouse.insert({ table: 'logs', values: batch, format: 'JSONEachRow', clickhouse_settings: { insert_deduplication_token: token } });
  }
});
afterAll(async () => {
  await h?.close();
});

const logs = async (query: string, who: TestAccount = me) => {
  const res = await h.app.inject({ method: 'GET', url: `/api/log/self${query}`, headers: who.auth });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().data as { items: Record<string, unknown>[]; page: number; page_size: number; total: number };
};
const stat = async (query: string, who: TestAccount = me) => {
  const res = await h.app.inject({ method: 'GET', url: `/api/log/self/stat${query}`, headers: who.auth });
  expect(res.statusCode, res.body).toBe(200);
  expect(res.json()).toMatchObject({ success: true, message: '' });
  return res.json().data as { quota: number; rpm: number; tpm: number };
};
const ids = (items: Record<string, unknown>[]) => items.map((i) => i.request_id);

describe('GET /api/log/self', () => {
  it('returns the caller\'s entries newest first, each duplicate once, with the contract\'s fields and types', async () => {
    const data = await logs('');
    expect(Object.keys(data).sort()).toEqual(['items', 'page', 'page_size', 'total']);
    expect(data).toMatchObject({ page: 1, page_size: 10, total: 5 });
    expect(ids(data.items)).toEqual(['req-5', 'req-4', 'req-2', 'req-1', 'req-3']);
    for (const item of data.items) {
      expect(Object.keys(item).sort()).toEqual(Object.keys(LOG_FIELDS).sort());
      for (const [field, type] of Object.entries(LOG_FIELDS)) expect(typeof item[field], field).toBe(type);
      expect(item.user_id).toBe(me.user.id);
    }
    expect(data.items[3]).toEqual({ ...r1 });
    expect(data.items[3]!.is_stream).toBe(true);
    expect(data.items[2]!.is_stream).toBe(false);
    // A row written without a protocol (every row before /v1/chat/completions) reads 'anthropic'; a
    // row that is no request (req-4, a top-up) reads '' whatever billing wrote in the column.
    expect(data.items.map((i) => i.protocol)).toEqual(['anthropic', '', 'anthropic', 'openai', 'anthropic']);
  });

  it('documents protocol in the OpenAPI document\'s log entry', async () => {
    const doc = (await h.app.inject({ method: 'GET', url: '/api/openapi.json' })).json();
    for (const path of ['/api/log/self']) {
      const entry = doc.paths[path].get.responses['200'].content['application/json'].schema.properties.data.properties.items.items;
      expect(entry.required, path).toContain('protocol');
      expect(entry.properties.protocol, path).toMatchObject({ type: 'string', enum: ['anthropic', 'openai', ''] });
      expect(entry.properties.protocol.description, path).toMatch(/chat\/completions/);
    }
  });

  it('filters by every parameter of the contract', async () => {
    expect(ids((await logs('?type=2')).items)).toEqual(['req-2', 'req-1', 'req-3']);
    expect((await logs('?type=0')).total).toBe(5);
    expect(ids((await logs('?type=5')).items)).toEqual(['req-5']);
    expect(ids((await logs('?token_name=k1')).items)).toEqual(['req-5', 'req-1', 'req-3']);
    expect(ids((await logs('?model_name=m2')).items)).toEqual(['req-2']);
    expect(ids((await logs('?group=vip')).items)).toEqual(['req-2']);
    const one = await logs('?request_id=req-1');
    expect(one.total).toBe(1);
    expect(ids(one.items)).toEqual(['req-1']);
    expect(ids((await logs('?upstream_request_id=up-1')).items)).toEqual(['req-1']);
    expect(ids((await logs(`?start_timestamp=${now - 100}`)).items)).toEqual(['req-5', 'req-4', 'req-2', 'req-1']);
    expect(ids((await logs(`?end_timestamp=${now - 25}`)).items)).toEqual(['req-1', 'req-3']);
    expect(ids((await logs(`?start_timestamp=${now - 25}&end_timestamp=${now - 10}&type=2`)).items)).toEqual(['req-2']);
    expect((await logs('?request_id=req-1', someoneElse)).total).toBe(0);
  });

  // Before: ignored (every channel's rows listed) while /api/log/self/stat with the same query summed one channel's.
  it('filters by channel, as its stat does', async () => {
    expect(ids((await logs('?channel=4')).items)).toEqual(['req-2']);
    expect(ids((await logs('?channel=4&type=5')).items)).toEqual([]);
    expect(await stat('?channel=4')).toMatchObject({ quota: 200 });
  });

  it('pages from 1 and caps page_size at 100', async () => {
    const p2 = await logs('?p=2&page_size=2');
    expect(p2).toMatchObject({ page: 2, page_size: 2, total: 5 });
    expect(ids(p2.items)).toEqual(['req-2', 'req-1']);
    expect(ids((await logs('?p=3&page_size=2')).items)).toEqual(['req-3']);
    expect((await logs('?page_size=1000')).page_size).toBe(100);
    // `page` is `p`'s alias, as the contract says (new-api's clients send either).
    const byPage = await logs('?page=2&page_size=2');
    expect(byPage).toMatchObject({ page: 2, page_size: 2, total: 5 });
    expect(ids(byPage.items)).toEqual(['req-2', 'req-1']);
  });

  it('refuses bad parameters with 400 naming them', async () => {
    for (const [q, field] of [['?p=0', 'p'], ['?type=9', 'type'], ['?start_timestamp=abc', 'start_timestamp']] as const) {
      const res = await h.app.inject({ method: 'GET', url: `/api/log/self${q}`, headers: me.auth });
      expect(res.statusCode).toBe(400);
      expect(res.json().message).toMatch(new RegExp(`^${field}: `));
    }
    expect((await h.app.inject({ method: 'GET', url: '/api/log/self' })).statusCode).toBe(401);
  });
});

describe('GET /api/log/self/stat', () => {
  it('sums consumed quota once per request and counts the last minute', async () => {
    // r1 (duplicated) + r2 + r3 consumption; rpm/tpm: r1 and r2 only.
    expect(await stat('')).toEqual({ quota: 700, rpm: 2, tpm: 45 });
  });

  it('applies the filters', async () => {
    expect(await stat('?type=1')).toEqual({ quota: 10_000, rpm: 1, tpm: 0 });
    expect(await stat('?token_name=k1')).toEqual({ quota: 500, rpm: 1, tpm: 15 });
    expect(await stat('?model_name=m2')).toEqual({ quota: 200, rpm: 1, tpm: 30 });
    expect(await stat('?channel=4')).toEqual({ quota: 200, rpm: 1, tpm: 30 });
    expect(await stat('?group=vip')).toEqual({ quota: 200, rpm: 1, tpm: 30 });
    // The list's request id filters too (before: ignored, every request's quota summed).
    expect(await stat('?request_id=req-2')).toEqual({ quota: 200, rpm: 1, tpm: 30 });
    expect(await stat('?upstream_request_id=up-1')).toEqual({ quota: 100, rpm: 1, tpm: 15 });
    expect(await stat('?request_id=req-2&upstream_request_id=up-1')).toEqual({ quota: 0, rpm: 0, tpm: 0 });
    expect(await stat(`?start_timestamp=${now - 100}`)).toEqual({ quota: 300, rpm: 2, tpm: 45 });
    expect(await stat(`?start_timestamp=${now - 7200}&end_timestamp=${now - 1000}`)).toEqual({ quota: 400, rpm: 2, tpm: 45 });
    expect(await stat('', someoneElse)).toEqual({ quota: 999, rpm: 1, tpm: 1000 });
    const data = await stat('');
    for (const v of Object.values(data)) expect(Number.isInteger(v)).toBe(true);
  });
});

describe('the log routes while ClickHouse cannot answer', () => {
  it('answer 503 with Retry-After in the envelope, and the log again once it answers', async () => {
    // A console whose ClickHouse address has nothing listening: the log store is down.
    const down = await startConsoleHarness({ CLICKHOUSE_URL: `http://127.0.0.1:${await freePort()}` });
    try {
      const who = await down.account();
      for (const path of ['/api/log/self', '/api/log/self?p=3&token_name=k1', '/api/log/self/stat', '/api/log/self/daily?days=7']) {
        const res = await down.app.inject({ method: 'GET', url: path, headers: who.auth });
        expect(res.statusCode, path).toBe(503);
        expect(res.headers['retry-after']).toBe('5');
        expect(res.json()).toEqual({ success: false, message: 'the request log cannot be read right now; retry shortly' });
        // Nothing of the ClickHouse address or the statement reaches the user.
        expect(res.body).not.toMatch(/127\.0\.0\.1|SELECT|ECONNREFUSED/);
      }
    } finally {
      await down.close();
    }
    // The console with a ClickHouse that answers still serves the same routes.
    expect((await logs('')).total).toBeGreaterThan(0);
  });
});
