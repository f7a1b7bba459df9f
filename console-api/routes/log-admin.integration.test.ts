// GET /api/log/ and /api/log/stat (administrators: every account's log) against the real ClickHouse.
// A read across accounts sees every row of its database, whoever wrote it (other test files write at
// the wall clock, earlier runs of this one at their own clock), so this file migrates a ClickHouse
// database of its own and drops it at the end: every answer is checked against this file's rows.
import { randomBytes, randomInt, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ConsoleHarness, type TestAccount, startConsoleHarness } from '../../tests/harness/console-harness.js';
import { migrateClickHouse } from '../../infra/clickhouse/migrate.js';
import { testConfig } from '../../infra/testing/test-config.js';
import { ALL_ACCOUNTS_DEFAULT_WINDOW_SEC } from './log-admin.js';

const DATABASE = `gateway_test_log_admin_${randomBytes(4).toString('hex')}`;
// Not on a quarter hour: the default window's start is rounded down to one, the last minute is not.
const NOW = Date.UTC(2031, 4, 6, 12, 7, 41) / 1000;
const DEFAULT_START = Math.floor((NOW - ALL_ACCOUNTS_DEFAULT_WINDOW_SEC) / 900) * 900;

let h: ConsoleHarness;
let alice: TestAccount;
let bob: TestAccount;
let admin: TestAccount;
let nextId = 0;

interface Row {
  id: number; user_id: number; created_at: number; type: number; content: string; username: string; token_name: string;
  model_name: string; quota: number; prompt_tokens: number; completion_tokens: number; use_time: number; is_stream: boolean;
  channel: number; token_id: number; group: string; request_id: string; upstream_request_id: string; protocol: string;
}
const rows: Row[] = [];

function row(who: TestAccount, over: Partial<Row>): Row {
  const r: Row = {
    id: ++nextId + randomInt(1, 1e9) * 1000, user_id: who.user.id, created_at: NOW, type: 2, content: '', username: who.user.username,
    token_name: 'k1', model_name: 'm1', quota: 0, prompt_tokens: 0, completion_tokens: 0, use_time: 1, is_stream: false,
    channel: 3, token_id: 7, group: 'default', request_id: `adm-${randomUUID()}`, upstream_request_id: '', protocol: 'anthropic', ...over,
  };
  rows.push(r);
  return r;
}

beforeAll(async () => {
  await migrateClickHouse(testConfig({ CLICKHOUSE_DATABASE: DATABASE }));
  h = await startConsoleHarness({ CLICKHOUSE_DATABASE: DATABASE }, { now: () => NOW });
  alice = await h.account();
  bob = await h.account();
  admin = await h.account({ role: 10 });
  row(alice, { created_at: NOW - 30, quota: 100, prompt_tokens: 10, completion_tokens: 5 });
  row(alice, { created_at: NOW - 20, quota: 200, prompt_tokens: 20, completion_tokens: 10, model_name: 'm2', channel: 4 });
  row(alice, { created_at: NOW - 3600, quota: 400, prompt_tokens: 100, completion_tokens: 100 });
  row(alice, { created_at: NOW - 10, type: 1, quota: 10_000, token_name: '', model_name: '', content: 'top-up' });
  row(bob, { created_at: NOW - 15, quota: 999, prompt_tokens: 1000, channel: 4 });
  row(bob, { created_at: NOW - 20, quota: 7, channel: 4, upstream_request_id: 'up-bob' });
  row(bob, { created_at: NOW - 7000, quota: 70 });
  row(bob, { created_at: NOW - 5 * 3600 - 450, quota: 5, group: 'vip' });
  // Outside the default window: listed with an explicit start or a username only.
  row(bob, { created_at: NOW - 2 * 86400, quota: 50 });
  // The billing outbox sends the batch again with its token (its delete was lost): dropped on insert.
  const token = `log-outbox-${randomUUID()}`;
  for (let i = 0; i < 2; i++) {
    await h.clickhouse.insert({ table: 'logs', values: rows, format: 'JSONEachRow', clickhouse_settings: { insert_deduplication_token: token } });
  }
});
afterAll(async () => {
  await h?.clickhouse.command({ query: `DROP DATABASE IF EXISTS \`${DATABASE}\`` });
  await h?.close();
});

type PageData = { items: Row[]; page: number; page_size: number; total: number };
const get = (url: string, who: TestAccount = admin) => h.app.inject({ method: 'GET', url, headers: who.auth });
const list = async (query: string): Promise<PageData> => {
  const res = await get(`/api/log/${query}`);
  expect(res.statusCode, res.body).toBe(200);
  expect(res.json()).toMatchObject({ success: true, message: '' });
  return res.json().data;
};
const stat = async (query: string) => {
  const res = await get(`/api/log/stat${query}`);
  expect(res.statusCode, res.body).toBe(200);
  return res.json().data as { quota: number; rpm: number; tpm: number };
};
/** This file's rows matching `keep`, newest first: the all-accounts answer's reference. */
const expected = (keep: (r: Row) => boolean) => rows.filter(keep)
  .sort((a, b) => b.created_at - a.created_at || (a.request_id < b.request_id ? 1 : -1) || b.user_id - a.user_id)
  .map((r) => r.request_id);
const ids = (items: Row[]) => items.map((i) => i.request_id);
const inDefaultWindow = (r: Row) => r.created_at >= DEFAULT_START;

describe('GET /api/log/ (administrators)', () => {
  it('lists every account\'s rows in the default window (24 h), newest first, each replay once, with the log entry\'s fields', async () => {
    const data = await list('');
    const want = expected(inDefaultWindow);
    expect(data).toMatchObject({ page: 1, page_size: 10, total: want.length });
    expect(ids(data.items)).toEqual(want);
    expect(new Set(data.items.map((i) => i.user_id))).toEqual(new Set([alice.user.id, bob.user.id]));
    const byId = new Map(rows.map((r) => [r.request_id, r]));
    // A top-up row is no request: its protocol reads '' whatever billing wrote in the column.
    const answered = (r: (typeof rows)[number]) => ({ ...r, protocol: r.type === 2 || r.type === 5 ? r.protocol : '' });
    for (const item of data.items) expect(item).toEqual(answered(byId.get(item.request_id)!));
    // An explicit start widens the window; 1 is all time.
    const all = await list('?start_timestamp=1&page_size=100');
    expect(ids(all.items)).toEqual(expected(() => true));
    expect(all.total).toBe(rows.length);
  });

  it('pages exactly across quarter hours and windows that cut them', async () => {
    const want = expected(inDefaultWindow);
    for (const size of [1, 2, 3]) {
      const seen: string[] = [];
      for (let p = 1; p <= Math.ceil(want.length / size) + 1; p++) {
        const page = await list(`?p=${p}&page_size=${size}`);
        expect(page.total).toBe(want.length);
        seen.push(...ids(page.items));
      }
      expect({ size, seen }).toEqual({ size, seen: want });
    }
    // Both ends inside a quarter hour: the partial quarter hours are counted from `logs`.
    const [start, end] = [NOW - 7001 - 100, NOW - 17];
    const cut = (r: Row) => r.created_at >= start && r.created_at <= end;
    const page = await list(`?start_timestamp=${start}&end_timestamp=${end}&page_size=3&p=2`);
    expect(page.total).toBe(expected(cut).length);
    expect(ids(page.items)).toEqual(expected(cut).slice(3, 6));
    // end_timestamp alone: the 24 h before it.
    const before = await list(`?end_timestamp=${NOW - 3000}`);
    const endOnly = (r: Row) => r.created_at <= NOW - 3000 && r.created_at >= Math.floor((NOW - 3000 - 86400) / 900) * 900;
    expect(ids(before.items)).toEqual(expected(endOnly));
  });

  it('filters by username (that account alone, no default window; unknown: an empty page)', async () => {
    const bobs = await list(`?username=${bob.user.username}`);
    expect(ids(bobs.items)).toEqual(expected((r) => r.user_id === bob.user.id));
    expect(await list('?username=nobody-by-that-name&p=2')).toEqual({ items: [], page: 2, page_size: 10, total: 0 });
    expect(ids((await list(`?username=${alice.user.username}&type=1`)).items)).toEqual(expected((r) => r.user_id === alice.user.id && r.type === 1));
  });

  it('filters by channel, alone and with the other filters', async () => {
    expect(ids((await list('?channel=4')).items)).toEqual(expected((r) => inDefaultWindow(r) && r.channel === 4));
    expect(ids((await list(`?channel=4&username=${bob.user.username}`)).items)).toEqual(expected((r) => r.user_id === bob.user.id && r.channel === 4));
    expect(ids((await list('?channel=4&model_name=m2')).items)).toEqual(expected((r) => r.channel === 4 && r.model_name === 'm2'));
    expect(ids((await list('?group=vip')).items)).toEqual(expected((r) => r.group === 'vip'));
    // Request ids are not in the quarter-hour table: read from `logs` across accounts.
    const one = rows[4]!;
    expect(await list(`?request_id=${one.request_id}`)).toMatchObject({ total: 1, items: [one] });
    expect(ids((await list('?upstream_request_id=up-bob')).items)).toEqual(expected((r) => r.upstream_request_id === 'up-bob'));
  });

  it('refuses bad input with 400 in the envelope, naming the field', async () => {
    for (const [q, field] of [['?p=-1', 'p'], ['?page_size=0', 'page_size'], ['?channel=abc', 'channel'], ['?channel=-2', 'channel'],
      ['?start_timestamp=soon', 'start_timestamp'], ['?type=9', 'type'], [`?username=${'x'.repeat(65)}`, 'username']] as const) {
      const res = await get(`/api/log/${q}`);
      expect(res.statusCode, q).toBe(400);
      expect(res.json(), q).toEqual({ success: false, message: expect.stringMatching(new RegExp(`^${field}: `)) });
    }
    expect((await get('/api/log/stat?channel=abc')).json()).toEqual({ success: false, message: 'channel: must be an integer (decimal digits only)' });
    // As everywhere in the console (README, "Paging"), a larger page_size is served at 100, not refused.
    expect((await list('?page_size=1000')).page_size).toBe(100);
  });

  it('refuses an ordinary account with 403 in the envelope', async () => {
    for (const path of ['/api/log/', '/api/log', '/api/log/stat', `/api/log/?username=${alice.user.username}`]) {
      const res = await get(path, alice);
      expect(res.statusCode, path).toBe(403);
      expect(res.json()).toEqual({ success: false, message: 'insufficient permission for this operation' });
    }
  });
});

describe('GET /api/log/stat (administrators)', () => {
  const consumedQuota = (items: Row[]) => items.filter((i) => i.type === 2).reduce((sum, i) => sum + i.quota, 0);

  it('sums the quota of the rows GET /api/log/ lists for the same filters', async () => {
    for (const q of ['', '?channel=4', `?username=${bob.user.username}`, `?username=${alice.user.username}&channel=3`, '?start_timestamp=1',
      `?start_timestamp=${NOW - 7001 - 100}&end_timestamp=${NOW - 17}`, '?model_name=m2', '?type=1',
      // Not in the per-quarter-hour stats: read from the rows (a 500 before: the stats table has no such column).
      `?request_id=${rows.find((r) => r.quota === 999)!.request_id}`, '?upstream_request_id=up-bob', '?request_id=no-such-request',
      `?upstream_request_id=up-bob&start_timestamp=1&end_timestamp=${NOW}`]) {
      const items = (await list(`${q}${q ? '&' : '?'}page_size=100`)).items;
      const s = await stat(q);
      const type = new URLSearchParams(q).get('type');
      const listed = type ? items.reduce((sum, i) => sum + i.quota, 0) : consumedQuota(items);
      expect({ q, quota: s.quota }).toEqual({ q, quota: listed });
    }
  });

  it('counts the last minute of every account in rpm and tpm (consumption only without a type)', async () => {
    const recent = rows.filter((r) => r.type === 2 && r.created_at >= NOW - 60);
    expect(await stat('')).toEqual({
      quota: consumedQuota(rows.filter(inDefaultWindow)),
      rpm: recent.length,
      tpm: recent.reduce((sum, r) => sum + r.prompt_tokens + r.completion_tokens, 0),
    });
    expect(await stat(`?username=${bob.user.username}&channel=4`)).toEqual({ quota: 1006, rpm: 2, tpm: 1000 });
    expect(await stat('?username=nobody-by-that-name')).toEqual({ quota: 0, rpm: 0, tpm: 0 });
  });
});
