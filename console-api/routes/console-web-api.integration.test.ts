// The endpoints the web console added: GET /api/log/self/daily (the dashboard's 30-day chart) and
// PUT /api/user/self (display name, password change).
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ConsoleHarness, startConsoleHarness } from '../../tests/harness/console-harness.js';

const DAY = 86_400;
// A clock of this file's own, in a month nobody else writes (ClickHouse partitions by month).
const NOW = Date.UTC(2004, 4, 20, 10, 0) / 1000;
let h: ConsoleHarness;
beforeAll(async () => {
  h = await startConsoleHarness({}, { now: () => NOW });
});
afterAll(async () => {
  await h?.close();
});

describe('GET /api/log/self/daily', () => {
  it('sums consumption per local day, every day present, a repeated outbox batch once, other types left out', async () => {
    const a = await h.account();
    const other = await h.account();
    const userId = Number(a.user.id);
    let n = 0;
    const row = (user: number, createdAt: number, over: Record<string, unknown> = {}) => ({
      id: user * 100 + ++n, user_id: user, created_at: createdAt, type: 2, content: '', username: 'u', token_name: 'k', model_name: 'm',
      quota: 1000, prompt_tokens: 10, completion_tokens: 2, use_time: 1, is_stream: false, channel: 1, token_id: 1, group: 'default',
      request_id: `daily-${user}-${n}`, upstream_request_id: '', ...over,
    });
    const today0 = Math.floor(NOW / DAY) * DAY;
    const batch = [
      row(userId, today0 + 3600),
      row(userId, today0 + 60, { quota: 7 }),
      row(userId, today0 - DAY + 100, { quota: 500, prompt_tokens: 5, completion_tokens: 1 }),
      row(userId, today0 - 30 * DAY), // outside the 30 days
      row(userId, today0 - 1800, { quota: 40 }), // 23:30 UTC yesterday: today at UTC+2
      row(userId, today0 + 200, { type: 1, quota: 999_999 }), // a top-up is not consumption
      row(Number(other.user.id), today0 + 300), // another account
    ];
    // Sent twice with its token, as billing/log-outbox.ts sends a batch whose delete was lost.
    const token = `log-outbox-${randomUUID()}`;
    for (let i = 0; i < 2; i++) {
      await h.clickhouse.insert({ table: 'logs', format: 'JSONEachRow', values: batch, clickhouse_settings: { insert_deduplication_token: token } });
    }

    const res = await h.app.inject({ method: 'GET', url: '/api/log/self/daily', headers: a.auth });
    expect(res.statusCode).toBe(200);
    const days = res.json().data as { day: number; requests: number; quota: number; prompt_tokens: number; completion_tokens: number }[];
    expect(days).toHaveLength(30);
    expect(days[0]!.day).toBe(today0 - 29 * DAY);
    expect(days[29]).toEqual({ day: today0, requests: 2, quota: 1007, prompt_tokens: 20, completion_tokens: 4 });
    expect(days[28]).toEqual({ day: today0 - DAY, requests: 2, quota: 540, prompt_tokens: 15, completion_tokens: 3 });
    expect(days.slice(0, 28).every((d) => d.requests === 0 && d.quota === 0)).toBe(true);

    const east = await h.app.inject({ method: 'GET', url: '/api/log/self/daily?days=2&utc_offset=120', headers: a.auth });
    const [yesterday, today] = east.json().data as { day: number; requests: number; quota: number }[];
    expect(today).toMatchObject({ day: today0 - 7200, requests: 3, quota: 1047 });
    expect(yesterday).toMatchObject({ requests: 1, quota: 500 });
  });

  it('refuses a bad range and an anonymous caller', async () => {
    const a = await h.account();
    const bad = await h.app.inject({ method: 'GET', url: '/api/log/self/daily?days=91', headers: a.auth });
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toEqual({ success: false, message: expect.stringContaining('days') });
    expect((await h.app.inject({ method: 'GET', url: '/api/log/self/daily' })).statusCode).toBe(401);
  });
});

describe('PUT /api/user/self', () => {
  it('changes the display name', async () => {
    const a = await h.account();
    const res = await h.app.inject({ method: 'PUT', url: '/api/user/self', headers: a.auth, payload: { display_name: 'New Name' } });
    expect(res.statusCode).toBe(200);
    expect(res.json().data).toMatchObject({ id: Number(a.user.id), display_name: 'New Name' });
    const empty = await h.app.inject({ method: 'PUT', url: '/api/user/self', headers: a.auth, payload: { display_name: '' } });
    expect(empty.statusCode).toBe(400);
  });

  it('changes the password only with the current one, and signs out the other sessions', async () => {
    const a = await h.account();
    const login = (password: string) => h.app.inject({ method: 'POST', url: '/api/user/login', payload: { username: a.user.username, password } });
    const otherSession = (await login(a.password)).json().data.token as string;

    const wrong = await h.app.inject({ method: 'PUT', url: '/api/user/self', headers: a.auth, payload: { original_password: 'not-it-at-all', password: 'a-new-password-1' } });
    expect(wrong.statusCode).toBe(401);
    expect(wrong.json().message).toMatch(/^original_password: /);
    expect((await login('a-new-password-1')).statusCode).toBe(401);

    const ok = await h.app.inject({ method: 'PUT', url: '/api/user/self', headers: a.auth, payload: { original_password: a.password, password: 'a-new-password-1' } });
    expect(ok.statusCode).toBe(200);
    expect((await login('a-new-password-1')).statusCode).toBe(200);
    expect((await login(a.password)).statusCode).toBe(401);
    // The session that changed it goes on; the other one ended.
    expect((await h.app.inject({ method: 'GET', url: '/api/user/self', headers: a.auth })).statusCode).toBe(200);
    expect((await h.app.inject({ method: 'GET', url: '/api/user/self', headers: { authorization: `Bearer ${otherSession}` } })).statusCode).toBe(401);
  });
});
