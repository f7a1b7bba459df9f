// Redemption codes are bearer credit: whoever holds one redeems it. So neither a database dump nor the
// service log may hold one, as for API keys; administrators still create, find, reveal and redeem them.
import { createHash } from 'node:crypto';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../infra/logger.js';
import { type ConsoleHarness, type TestAccount, startConsoleHarness } from '../../tests/harness/console-harness.js';

let h: ConsoleHarness;
let admin: TestAccount;
let root: TestAccount;
const logLines: string[] = [];
beforeAll(async () => {
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      logLines.push(chunk.toString('utf8'));
      done();
    },
  });
  h = await startConsoleHarness({}, { logger: createLogger({ LOG_LEVEL: 'info' }, 'console-api', stream) });
  admin = await h.account({ role: 10 });
  root = await h.account({ role: 100 });
});
afterAll(async () => {
  await h?.close();
});

const inject = (method: 'GET' | 'POST' | 'PUT', url: string, who: TestAccount, payload?: unknown) =>
  h.app.inject({ method, url, headers: who.auth, ...(payload === undefined ? {} : { payload: payload as object }) });
const makeCodes = async (who: TestAccount, name: string, count = 1) => {
  const res = await inject('POST', '/api/redemption/', who, { name, quota: 1000, count });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().data as string[];
};
const idOf = async (code: string) => {
  const items = (await inject('GET', `/api/redemption/?keyword=${code}`, admin)).json().data.items as { id: number }[];
  expect(items).toHaveLength(1);
  return items[0]!.id;
};

describe('redemption codes at rest', () => {
  it('stores no code, nor an unkeyed hash of one, in any column', async () => {
    const codes = await makeCodes(admin, 'at-rest', 3);
    expect(codes).toHaveLength(3);
    const rows = await h.sql<Record<string, unknown>[]>`SELECT * FROM redemptions WHERE name = 'at-rest'`;
    expect(rows).toHaveLength(3);
    for (const row of rows) {
      for (const [column, value] of Object.entries(row)) {
        for (const code of codes) {
          const where = `${column} of code #${String(row.id)}`;
          if (typeof value === 'string') expect(value, where).not.toContain(code);
          if (Buffer.isBuffer(value)) {
            expect(value.includes(Buffer.from(code)), where).toBe(false);
            expect(value.includes(Buffer.from(code, 'hex')), where).toBe(false);
            expect(value.toString('hex'), where).not.toContain(code);
            expect(value.equals(createHash('sha256').update(code).digest()), where).toBe(false);
          }
        }
      }
    }
  });

  it('redeems a code by its value, once', async () => {
    const [code] = await makeCodes(root, 'redeem-once');
    const user = await h.account();
    expect((await inject('POST', '/api/user/topup', user, { key: code })).json()).toEqual({ success: true, message: '', data: 1000 });
    const again = await inject('POST', '/api/user/topup', user, { key: code });
    expect(again.statusCode).toBe(409);
    expect(again.json().message).toBe('redemption code has already been used');
    const neighbour = code!.replace(/.$/, (c) => (c === '0' ? '1' : '0'));
    expect((await inject('POST', '/api/user/topup', user, { key: neighbour })).statusCode).toBe(404);
  });

  it('lists codes masked; the exact code or a part of the name still finds its row', async () => {
    const codes = await makeCodes(admin, 'masked-list', 2);
    const list = (await inject('GET', '/api/redemption/?keyword=masked-list', admin)).json().data;
    expect(list.total).toBe(2);
    for (const item of list.items as { key: string }[]) {
      expect(item.key).toMatch(/^[0-9a-f]{4}\*{8}[0-9a-f]{4}$/);
      expect(codes.map((c) => `${c.slice(0, 4)}********${c.slice(-4)}`)).toContain(item.key);
    }
    const found = (await inject('GET', `/api/redemption/?keyword=${codes[0]}`, admin)).json().data;
    expect(found.total).toBe(1);
    expect(found.items[0]).toMatchObject({ name: 'masked-list', key: `${codes[0]!.slice(0, 4)}********${codes[0]!.slice(-4)}` });
    const one = (await inject('GET', `/api/redemption/${found.items[0].id}`, admin)).json().data;
    expect(one.key).toBe(found.items[0].key);
    const edited = (await inject('PUT', '/api/redemption/', admin, { id: one.id, name: 'masked-edit' })).json().data;
    expect(edited).toMatchObject({ name: 'masked-edit', key: one.key });
  });

  it('reveals a code to the administrators who may change it, uncached', async () => {
    const [mine] = await makeCodes(admin, 'reveal');
    const [roots] = await makeCodes(root, 'reveal-root');
    const mineId = await idOf(mine!);
    const res = await inject('POST', `/api/redemption/${mineId}/key`, admin);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({ success: true, message: '', data: { key: mine } });
    expect(res.headers['cache-control']).toBe('no-store');
    expect((await inject('POST', `/api/redemption/${mineId}/key`, root)).json().data.key).toBe(mine);
    // Another administrator, or an administrator for root's code: the rule of PUT (a code is its creator's credit).
    const peer = await h.account({ role: 10 });
    expect((await inject('POST', `/api/redemption/${mineId}/key`, peer)).statusCode).toBe(403);
    expect((await inject('POST', `/api/redemption/${await idOf(roots!)}/key`, admin)).statusCode).toBe(403);
    expect((await inject('POST', `/api/redemption/${mineId}/key`, await h.account())).statusCode).toBe(403);
    expect((await inject('POST', '/api/redemption/987654321/key', root)).statusCode).toBe(404);
  });
});

describe('redemption code input', () => {
  it('refuses an empty or blank name, on creation and on edit, with "name: is required"', async () => {
    for (const name of ['', '   ', '\u3000']) {
      const res = await inject('POST', '/api/redemption/', admin, { name, quota: 1000 });
      expect(res.statusCode, JSON.stringify(name)).toBe(400);
      expect(res.json()).toEqual({ success: false, message: 'name: is required' });
    }
    const id = await idOf((await makeCodes(admin, 'named-input'))[0]!);
    const blank = await inject('PUT', '/api/redemption/', admin, { id, name: '  ' });
    expect(blank.json()).toEqual({ success: false, message: 'name: is required' });
  });

  it('stores an expiry up to 9999-12-31 23:59:59 UTC, a date the web console can show, and refuses a later one', async () => {
    const TOO_LATE = 'expired_time: must be at most 253402300799 (9999-12-31 23:59:59 UTC)';
    for (const expiredTime of [253_402_300_800, Number.MAX_SAFE_INTEGER]) {
      const res = await inject('POST', '/api/redemption/', admin, { name: 'far', quota: 1000, expired_time: expiredTime });
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({ success: false, message: TOO_LATE });
    }
    const [code] = await makeCodes(admin, 'far-expiry');
    const id = await idOf(code!);
    expect((await inject('PUT', '/api/redemption/', admin, { id, expired_time: Number.MAX_SAFE_INTEGER })).json())
      .toEqual({ success: false, message: TOO_LATE });
    const latest = await inject('PUT', '/api/redemption/', admin, { id, expired_time: 253_402_300_799 });
    expect(latest.statusCode, latest.body).toBe(200);
    expect(latest.json().data.expired_time).toBe(253_402_300_799);
  });
});

describe('redemption codes and the request log', () => {
  it('logs the path of a request, never its query string', async () => {
    const [code] = await makeCodes(admin, 'logged');
    logLines.length = 0;
    expect((await inject('GET', `/api/redemption/?keyword=${code}&p=1`, admin)).statusCode).toBe(200);
    // Unauthenticated and unknown routes are logged as well.
    await h.app.inject({ method: 'GET', url: `/api/redemption/?keyword=${code}` });
    await h.app.inject({ method: 'GET', url: `/api/no-such-route?keyword=${code}` });
    const out = logLines.join('');
    expect(out).not.toContain(code);
    const lines = logLines.map((l) => JSON.parse(l) as { msg?: string; req?: { method?: string; url?: string; remoteAddress?: string }; res?: { statusCode?: number } });
    // The lines still say what was asked, from where, and how it ended.
    expect(lines.filter((l) => l.msg === 'incoming request').map((l) => l.req)).toEqual(
      ['/api/redemption/', '/api/redemption/', '/api/no-such-route'].map((url) => expect.objectContaining({ method: 'GET', url, remoteAddress: '127.0.0.1' })),
    );
    expect(lines.filter((l) => l.msg === 'request completed').map((l) => l.res?.statusCode)).toEqual([200, 401, 404]);
  });
});
