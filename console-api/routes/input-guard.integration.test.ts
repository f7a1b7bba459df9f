// Hostile input answers 400 in the envelope, never 500: NUL characters (Postgres text cannot hold
// them), integers beyond INT columns, JSON nested deep enough to overflow recursive code.
import { connect } from 'node:net';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ConsoleHarness, type TestAccount, startConsoleHarness } from '../../tests/harness/console-harness.js';

let h: ConsoleHarness;
let user: TestAccount;
let admin: TestAccount;
/** Options are root's: the option writes below are made by the super administrator. */
let root: TestAccount;
beforeAll(async () => {
  h = await startConsoleHarness();
  user = await h.account();
  admin = await h.account({ role: 10 });
  root = await h.account({ role: 100 });
});
afterAll(async () => {
  await h?.close();
});

const inject = (method: string, url: string, who: TestAccount | undefined, payload?: unknown) =>
  h.app.inject({
    method: method as 'GET', url, ...(who ? { headers: who.auth } : {}),
    ...(payload === undefined ? {} : { payload: payload as object }),
  });

describe('NUL characters', () => {
  it.each([
    ['login username', 'POST', '/api/user/login', undefined, { username: 'ad\u0000min', password: 'x' }, 'username: must not contain NUL (U+0000) characters'],
    ['login password', 'POST', '/api/user/login', undefined, { username: 'admin', password: 'pass\u0000word' }, 'password: must not contain NUL (U+0000) characters'],
    ['register username', 'POST', '/api/user/register', undefined, { username: 'nul\u0000user', password: 'password-123' }, 'username: must not contain NUL (U+0000) characters'],
    ['register display_name', 'POST', '/api/user/register', undefined, { username: 'nuldisplay', password: 'password-123', display_name: 'a\u0000' }, 'display_name: must not contain NUL (U+0000) characters'],
    ['an API key name', 'POST', '/api/token/', 'user', { name: 'key\u0000', expired_time: -1, remain_quota: 0, unlimited_quota: true }, 'name: must not contain NUL (U+0000) characters'],
    ['a redemption code', 'POST', '/api/user/topup', 'user', { key: 'code\u0000' }, 'key: must not contain NUL (U+0000) characters'],
    ['an option value', 'PUT', '/api/option/', 'root', { key: 'TopUpLink', value: 'https://x.example/\u0000' }, 'value: must not contain NUL (U+0000) characters'],
    ['a nested property name', 'PUT', '/api/option/', 'root', { key: 'ModelRatio', value: { 'a\u0000': 1 } }, 'value: a property name must not contain NUL (U+0000) characters'],
    ['a channel name', 'POST', '/api/channel/', 'admin', { name: 'c\u0000', base_url: 'https://x.example', key: 'k', models: 'm' }, 'name: must not contain NUL (U+0000) characters'],
  ])('in %s: 400 naming the field', async (_label, method, url, who, payload, message) => {
    const res = await inject(method, url, who === 'user' ? user : who === 'admin' ? admin : who === 'root' ? root : undefined, payload);
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual({ success: false, message });
  });

  it.each([
    ['/api/token/?keyword=a%00b', 'user'],
    ['/api/token/search?keyword=%00', 'user'],
    ['/api/user/?keyword=x%00', 'admin'],
    ['/api/user/search?keyword=x%00', 'admin'],
    ['/api/channel/?keyword=%00', 'admin'],
    ['/api/redemption/?keyword=%00', 'admin'],
    ['/api/user/topup/self?keyword=%00', 'user'],
    ['/api/log/self?token_name=%00', 'user'],
  ])('in the query %s: 400 naming the parameter', async (url, who) => {
    const res = await inject('GET', url, who === 'admin' ? admin : user);
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual({ success: false, message: expect.stringMatching(/^(keyword|token_name): must not contain NUL \(U\+0000\) characters$/) });
  });

  it('in a path parameter: 400', async () => {
    const res = await inject('GET', '/api/user/1%00', admin);
    expect(res.statusCode).toBe(400);
    expect(res.json().success).toBe(false);
  });
});

describe('path ids are plain decimal digits', () => {
  // Number() reads all of these as the id of an existing key: found by the edge fuzz, where
  // `DELETE /api/token/%201` deleted key 1.
  it.each([' 1', '%201', '+1', '1e0', '0x1', '1.0', '01.', '1%20'])('DELETE /api/token/%s: 400, and the key is kept', async (id) => {
    const created = await inject('POST', '/api/token/', user, { name: 'kept', expired_time: -1, remain_quota: 0, unlimited_quota: true });
    expect(created.statusCode).toBe(200);
    const [key] = await h.sql<{ id: number }[]>`SELECT id FROM tokens WHERE user_id = ${user.user.id} AND deleted_at IS NULL ORDER BY id DESC LIMIT 1`;
    const target = id.replace('1', String(key!.id));
    const res = await inject('DELETE', `/api/token/${target.replace(/ /g, '%20')}`, user);
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual({ success: false, message: expect.stringMatching(/^id: must be a positive integer/) });
    const [row] = await h.sql`SELECT deleted_at FROM tokens WHERE id = ${key!.id}`;
    expect(row!.deleted_at).toBeNull();
  });
});

describe('an empty body labelled JSON', () => {
  // Before: 400 "request body is not valid JSON" for a DELETE or a key reveal from a client that sets
  // content-type: application/json on every request.
  it('is no body: a DELETE and a key reveal succeed, a route that needs a body names what is missing', async () => {
    const json = { ...user.auth, 'content-type': 'application/json', 'content-length': '0' };
    const created = await inject('POST', '/api/token/', user, { name: 'empty-body', expired_time: -1, remain_quota: 0, unlimited_quota: true });
    expect(created.statusCode).toBe(200);
    const [key] = await h.sql<{ id: number }[]>`SELECT id FROM tokens WHERE user_id = ${user.user.id} AND deleted_at IS NULL ORDER BY id DESC LIMIT 1`;
    const reveal = await h.app.inject({ method: 'POST', url: `/api/token/${key!.id}/key`, headers: json, payload: '' });
    expect(reveal.statusCode, reveal.body).toBe(200);
    expect(reveal.json().data.key).toMatch(/^sk-/);
    const removed = await h.app.inject({ method: 'DELETE', url: `/api/token/${key!.id}`, headers: json, payload: '' });
    expect(removed.statusCode, removed.body).toBe(200);
    const needsBody = await h.app.inject({ method: 'POST', url: '/api/token/', headers: json, payload: '' });
    expect(needsBody.statusCode).toBe(400);
    expect(needsBody.json().message).not.toMatch(/not valid JSON/);
  });
});

describe('query integers are plain decimal digits', () => {
  // Number() read `0x10` as 16 and `1e3` as 1000: GET /api/token/?p=0x10 served page 16. One value
  // has one spelling; a minus sign only where negatives mean something (utc_offset).
  it.each([
    ['/api/token/?p=0x10', 'user', 'p'], ['/api/token/?p=1e3', 'user', 'p'], ['/api/token/?page=0x2', 'user', 'page'],
    ['/api/token/?page_size=1e1', 'user', 'page_size'], ['/api/token/?p=%201', 'user', 'p'], ['/api/token/?p=%2B1', 'user', 'p'],
    ['/api/token/?p=1.0', 'user', 'p'], ['/api/token/?p=-1', 'user', 'p'], ['/api/token/?p=0b1', 'user', 'p'],
    ['/api/channel/?p=0x10', 'admin', 'p'], ['/api/redemption/?page_size=0x10', 'admin', 'page_size'], ['/api/user/?p=1e1', 'admin', 'p'],
    ['/api/user/topup?user_id=0x1', 'admin', 'user_id'], ['/api/user/topup?user_id=1e0', 'admin', 'user_id'],
    ['/api/user/topup/self?p=0x1', 'user', 'p'],
    ['/api/log/self?type=0x2', 'user', 'type'], ['/api/log/self?start_timestamp=1e9', 'user', 'start_timestamp'],
    ['/api/log/self/stat?end_timestamp=0x7fffffff', 'user', 'end_timestamp'], ['/api/log/stat?channel=0x1', 'admin', 'channel'],
    ['/api/log/self/daily?days=1e1', 'user', 'days'], ['/api/log/self/daily?utc_offset=0x10', 'user', 'utc_offset'],
    ['/api/log/self/daily?utc_offset=--60', 'user', 'utc_offset'], ['/api/log/self/daily?utc_offset=-6e1', 'user', 'utc_offset'],
  ])('GET %s: 400 naming the parameter', async (url, who, name) => {
    const res = await inject('GET', url, who === 'admin' ? admin : user);
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual({ success: false, message: expect.stringMatching(new RegExp(`^${name}: must be an integer \\(decimal digits`)) });
  });

  it('decimal digits still page, filter and take a negative offset', async () => {
    for (let i = 0; i < 3; i++) {
      expect((await inject('POST', '/api/token/', user, { name: `paged ${i}`, expired_time: -1, remain_quota: 0, unlimited_quota: true })).statusCode).toBe(200);
    }
    const page2 = await inject('GET', '/api/token/?p=2&page_size=2', user);
    expect(page2.statusCode, page2.body).toBe(200);
    expect(page2.json().data).toMatchObject({ page: 2, page_size: 2 });
    expect((await inject('GET', '/api/token/?p=&page_size=', user)).json().data).toMatchObject({ page: 1, page_size: 10 });
    expect((await inject('GET', `/api/user/topup?user_id=${user.user.id}`, admin)).statusCode).toBe(200);
    const daily = await inject('GET', '/api/log/self/daily?days=7&utc_offset=-300', user);
    expect(daily.statusCode, daily.body).toBe(200);
  });
});

describe('deep nesting', () => {
  it('an option value nested beyond the limit is a 400, even one deep enough to overflow JSON.stringify', async () => {
    for (const depth of [400_000, 40]) {
      const payload = `{"key":"ModelRatio","value":${'['.repeat(depth)}${']'.repeat(depth)}}`;
      const res = await h.app.inject({ method: 'PUT', url: '/api/option/', headers: { ...root.auth, 'content-type': 'application/json' }, payload });
      expect(res.statusCode, `depth ${depth}: ${res.body.slice(0, 200)}`).toBe(400);
      // Past the raw scan's 128 levels, refused before JSON.parse for the body as a whole.
      const message = depth > 128 ? 'request body nests objects and arrays more than 128 levels deep' : expect.stringMatching(/^value(\.0)*: is nested more than 32 levels deep$/);
      expect(res.json()).toEqual({ success: false, message });
    }
    // A value of ordinary depth still works.
    expect((await inject('PUT', '/api/option/', root, { key: 'GroupRateLimits', value: { default: { rpm: 10 } } })).statusCode).toBe(200);
  });

  it('deep nesting in any body is refused before its schema', async () => {
    const payload = `{"username":"x","password":${'{"a":'.repeat(100)}1${'}'.repeat(100)}}`;
    const res = await h.app.inject({ method: 'POST', url: '/api/user/login', headers: { 'content-type': 'application/json' }, payload });
    expect(res.statusCode).toBe(400);
    expect(res.json().message).toMatch(/^password(\.a)*: is nested more than 32 levels deep$/);
  });
});

describe('integers bound for INT columns', () => {
  it.each([
    ['type', 2 ** 31], ['type', 1e15], ['weight', 2 ** 31], ['weight', -1],
  ])('channel %s = %d is a 400, not a Postgres overflow', async (field, value) => {
    const res = await inject('POST', '/api/channel/', admin, { name: 'ints', base_url: 'https://x.example', key: 'k', models: 'm', [field]: value });
    expect(res.statusCode, res.body).toBe(400);
    // type is one of the relay's types (1, 14), which bounds it further.
    const rule = field === 'type' ? 'must be 1 \\(OpenAI Chat Completions\\) or 14 \\(Anthropic Messages\\), the types the relay speaks' : 'must be at (most 2147483647|least 0)';
    expect(res.json()).toEqual({ success: false, message: expect.stringMatching(new RegExp(`^${field}: ${rule}$`)) });
  });

  it('API key rate limits stay within INT', async () => {
    const res = await inject('POST', '/api/token/', user, { name: 'k', expired_time: -1, remain_quota: 0, unlimited_quota: true, rate_limit_rpm: 2 ** 31 });
    expect(res.statusCode).toBe(400);
    expect(res.json().message).toMatch(/^rate_limit_rpm: /);
  });
});

// What Fastify's router and Node's HTTP parser refuse, on a real socket (inject bypasses the parser).
describe('requests refused below the routes', () => {
  let base: { host: string; port: number };
  beforeAll(async () => {
    await h.app.listen({ host: '127.0.0.1', port: 0 });
    const address = h.app.server.address();
    if (!address || typeof address !== 'object') throw new Error('no address');
    base = { host: '127.0.0.1', port: address.port };
  });

  /** Sends raw bytes, returns status and body of the answer (the server closes after it, or we do). */
  const raw = (bytes: string | Buffer) => new Promise<{ status: number; body: string }>((resolve, reject) => {
    const socket = connect(base.port, base.host, () => socket.write(bytes));
    let text = '';
    socket.setTimeout(5000, () => socket.destroy(new Error('no answer within 5 s')));
    socket.on('data', (d) => {
      text += d.toString('latin1');
      const end = text.indexOf('\r\n\r\n');
      const length = /content-length: (\d+)/i.exec(text)?.[1];
      if (end >= 0 && length !== undefined && text.length >= end + 4 + Number(length)) {
        socket.destroy();
        resolve({ status: Number(text.slice(9, 12)), body: text.slice(end + 4, end + 4 + Number(length)) });
      }
    });
    socket.on('error', reject);
  });

  const bodyRequest = (method: string, path: string, headers: string, body: Buffer | string) => {
    const bytes = Buffer.isBuffer(body) ? body : Buffer.from(body, 'utf8');
    return Buffer.concat([Buffer.from(`${method} ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: ${user.auth.authorization}\r\nContent-Type: application/json\r\n${headers}Content-Length: ${bytes.length}\r\n\r\n`, 'latin1'), bytes]);
  };

  it('a DELETE labelled JSON with neither Content-Length nor Transfer-Encoding (no body, RFC 9112 §6.3) succeeds', async () => {
    // Before: 400 "request body is not valid JSON" (fetch wrappers set the type on every request).
    const created = await inject('POST', '/api/token/', user, { name: 'no-length', expired_time: -1, remain_quota: 0, unlimited_quota: true });
    expect(created.statusCode).toBe(200);
    const [key] = await h.sql<{ id: number }[]>`SELECT id FROM tokens WHERE user_id = ${user.user.id} AND deleted_at IS NULL ORDER BY id DESC LIMIT 1`;
    const res = await raw(`DELETE /api/token/${key!.id} HTTP/1.1\r\nHost: x\r\nAuthorization: ${user.auth.authorization}\r\nContent-Type: application/json\r\n\r\n`);
    expect(res.status, res.body).toBe(200);
    expect(JSON.parse(res.body)).toEqual({ success: true, message: '' });
  });

  it('a body in a content-coding (gzip, a plain body labelled gzip): 415 saying so, nothing created; identity is read as it is', async () => {
    const body = JSON.stringify({ name: 'coded-body', expired_time: -1, remain_quota: 0, unlimited_quota: true });
    for (const [coding, bytes] of [['gzip', gzipSync(body)], ['gzip', body], ['br', body], ['identity, gzip', body]] as const) {
      const res = await raw(bodyRequest('POST', '/api/token/', `Content-Encoding: ${coding}\r\n`, bytes));
      expect(res.status, `${coding}: ${res.body}`).toBe(415);
      expect(JSON.parse(res.body)).toEqual({ success: false, message: 'send the body uncompressed: Content-Encoding is not supported (send identity)' });
    }
    expect((await h.sql`SELECT 1 FROM tokens WHERE name = 'coded-body'`).length).toBe(0);
    const plain = await raw(bodyRequest('POST', '/api/token/', 'Content-Encoding: identity\r\n', body));
    expect(plain.status, plain.body).toBe(200);
  });

  it('a body that is not UTF-8: 400 saying so, where it was stored with U+FFFD in place of the bytes', async () => {
    const bytes = Buffer.concat([Buffer.from('{"name":"bad', 'utf8'), Buffer.from([0xff, 0xfe]), Buffer.from('","expired_time":-1,"remain_quota":0,"unlimited_quota":true}', 'utf8')]);
    const res = await raw(bodyRequest('POST', '/api/token/', '', bytes));
    expect(res.status, res.body).toBe(400);
    expect(JSON.parse(res.body)).toEqual({ success: false, message: 'request body is not valid UTF-8' });
    expect((await h.sql`SELECT 1 FROM tokens WHERE user_id = ${user.user.id} AND name LIKE 'bad%'`).length).toBe(0);
    // A byte order mark is still "not valid JSON", as JSON.parse had it.
    const bom = await raw(bodyRequest('POST', '/api/token/', '', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{}')])));
    expect(JSON.parse(bom.body)).toEqual({ success: false, message: 'request body is not valid JSON' });
  });

  it.each([
    ['a malformed percent-escape in the path', 'GET /api/channel/%E0%A4%A HTTP/1.1\r\nHost: x\r\n\r\n', 400, 'the request path is not a valid URL (a malformed percent-escape?)'],
    ['a lone percent sign', 'DELETE /api/redemption/%%/ HTTP/1.1\r\nHost: x\r\n\r\n', 400, 'the request path is not a valid URL (a malformed percent-escape?)'],
    ['a malformed percent-escape in the query string', 'GET /api/status?x=%E0%A4%A HTTP/1.1\r\nHost: x\r\n\r\n', 400, 'the query string is not valid (a malformed percent-escape?)'],
    ['a percent sign without digits in the query string', 'GET /api/token/?keyword=%zz HTTP/1.1\r\nHost: x\r\n\r\n', 400, 'the query string is not valid (a malformed percent-escape?)'],
    ['a path parameter over 100 characters', `DELETE /api/channel/1${'0'.repeat(400)} HTTP/1.1\r\nHost: x\r\n\r\n`, 414, 'a path parameter is too long'],
    ['a control character in a header value', 'GET /api/status HTTP/1.1\r\nHost: x\r\nX-A: a\u0001b\r\n\r\n', 400, 'the request is not valid HTTP'],
    ['headers over 16 KiB', `GET /api/status HTTP/1.1\r\nHost: x\r\nX-A: ${'a'.repeat(20_000)}\r\n\r\n`, 431, 'the request headers are too large'],
  ])('%s: its status in the envelope', async (_label, bytes, status, message) => {
    const res = await raw(bytes);
    expect(res.status, res.body).toBe(status);
    expect(JSON.parse(res.body)).toEqual({ success: false, message });
  });

  it('routes a request line in absolute form by its path, as RFC 9112 has a server accept it', async () => {
    const status = await raw('GET http://console.example/api/status HTTP/1.1\r\nHost: console.example\r\n\r\n');
    expect(status.status).toBe(200);
    expect(JSON.parse(status.body)).toMatchObject({ success: true, data: expect.any(Object) });
    const missing = await raw('GET HTTPS://console.example:8443/api/no-such-thing?x=1 HTTP/1.1\r\nHost: x\r\n\r\n');
    expect(missing.status).toBe(404);
    expect(JSON.parse(missing.body)).toEqual({ success: false, message: 'no such endpoint' });
  });
});

describe('bodies that are not JSON, and values out of range', () => {
  it.each([
    ['text/plain'], ['text/plain; charset=utf-8'], ['application/x-www-form-urlencoded'], ['application/xml'],
  ])('a %s body answers 415 in the envelope, on a public and an authenticated route', async (type) => {
    for (const [method, url, who] of [['POST', '/api/user/login', undefined], ['PUT', '/api/user/self', user], ['POST', '/api/token/', user]] as const) {
      const res = await h.app.inject({
        method, url, headers: { 'content-type': type, ...(who ? who.auth : {}) }, payload: '{"username":"a","password":"b","name":"k"}',
      });
      expect(res.statusCode, `${type} ${url}`).toBe(415);
      expect(res.json()).toEqual({ success: false, message: 'send the body as Content-Type: application/json' });
    }
  });

  it('a JSON null, an array or a number as the body: 400 as a body that is not an object, nothing changed (null passed as {}, a 200)', async () => {
    for (const payload of ['null', '[]', '1']) {
      for (const [method, url, who] of [['PUT', '/api/user/self', user], ['POST', '/api/token/', user], ['POST', '/api/user/login', undefined]] as const) {
        const res = await h.app.inject({ method, url, headers: { 'content-type': 'application/json', ...(who ? who.auth : {}) }, payload });
        expect(res.statusCode, `${payload} ${url}`).toBe(400);
        expect(res.json().success, `${payload} ${url}`).toBe(false);
        expect(res.json().message, `${payload} ${url}`).toMatch(/object/);
      }
    }
  });

  it('a string too long is reported as too long, not as "must be a string"', async () => {
    const login = await inject('POST', '/api/user/login', undefined, { username: 'u'.repeat(65), password: 'p'.repeat(129) });
    expect(login.statusCode).toBe(400);
    expect(login.json()).toEqual({ success: false, message: 'username: must be at most 64 characters; password: must be at most 128 characters' });
    const oidc = await inject('GET', `/api/oauth/oidc/start?aff_code=${'x'.repeat(100)}`, undefined);
    expect(oidc.statusCode).toBe(400);
    expect(oidc.json().message).toMatch(/^aff_code: must be at most \d+ characters$/);
    const key = await inject('POST', '/api/token/', user, { name: 'k', expired_time: -1, remain_quota: 0, unlimited_quota: true, rate_limit_rpm: 2_000_000_000 });
    expect(key.statusCode).toBe(400);
    expect(key.json()).toEqual({ success: false, message: 'rate_limit_rpm: must be at most 1,000,000,000' });
  });
});

// Valid JSON whose property names would poison a prototype: Fastify's parser answered "not valid JSON".
describe('prototype property names (D4)', () => {
  const raw = (url: string, who: TestAccount, payload: string) =>
    h.app.inject({ method: 'PUT', url, headers: { ...who.auth, 'content-type': 'application/json' }, payload });

  it.each([
    ['at the top', '{"key":"ModelRatio","__proto__":{"x":1},"value":"{}"}', 'body: the property name "__proto__" is refused (it names an object\'s prototype)'],
    ['nested', '{"key":"ModelRatio","value":{"__proto__":2}}', 'value: the property name "__proto__" is refused (it names an object\'s prototype)'],
    ['constructor.prototype', '{"key":"ModelRatio","value":{"constructor":{"prototype":{"y":1}}}}', 'value: a property "constructor" holding "prototype" is refused (prototype poisoning)'],
  ])('%s: 400 naming the property, not "not valid JSON"', async (_label, payload, message) => {
    const res = await raw('/api/option/', root, payload);
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual({ success: false, message });
  });

  it('a model named constructor stays an ordinary name (the relay prices it as its own key)', async () => {
    const res = await raw('/api/option/', root, '{"key":"ModelRatio","value":{"constructor":2}}');
    expect(res.statusCode, res.body).toBe(200);
  });

  it('invalid JSON is still "not valid JSON"', async () => {
    const res = await raw('/api/option/', root, '{"key":');
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ success: false, message: 'request body is not valid JSON' });
  });
});

// Read through the raw scan before JSON.parse (app.ts parseJsonBody).
describe('JSON bodies the scan refuses', () => {
  const post = (url: string, payload: string, who?: TestAccount) =>
    h.app.inject({ method: 'POST', url, headers: { ...(who?.auth ?? {}), 'content-type': 'application/json' }, payload });

  it('a key named twice in one object: 400 naming it, where the last value used to win', async () => {
    const res = await post('/api/redemption/', '{"name":"twice","quota":10,"count":1,"qu\\u006fta":20}', admin);
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual({ success: false, message: 'request body names the key "quota" twice in one object' });
  });

  it('more than 20,000 object keys, however they are spread: 400 before anything reads them, even anonymous', async () => {
    const keys = Array.from({ length: 20_001 }, (_, i) => `"k${i}":0`).join(',');
    const res = await post('/api/user/login', `{"username":"x","password":"y","extra":{${keys}}}`);
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual({ success: false, message: 'request body holds more than 20,000 object keys' });
  });

  it('more than 50,000 values with no key (empty objects, nested arrays): 400, even anonymous', async () => {
    const res = await post('/api/user/register', `{"username":"x","password":"y","extra":[${Array.from({ length: 50_001 }, () => '[]').join(',')}]}`);
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual({ success: false, message: 'request body holds more than 50,000 JSON values' });
  });

  it('nesting past 128 levels: 400', async () => {
    const res = await post('/api/user/login', `{"username":${'['.repeat(128)}${']'.repeat(128)}}`);
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json().message).toMatch(/more than 128 levels deep/);
  });
});

describe('a request that stops arriving', () => {
  it('is answered 408 in the envelope and closed once CONSOLE_REQUEST_TIMEOUT_MS has passed, not held for good', async () => {
    const quick = await startConsoleHarness({ CONSOLE_REQUEST_TIMEOUT_MS: '1000' });
    if (quick.app.server.address() === null) await quick.app.listen({ port: 0, host: '127.0.0.1' });
    const port = (quick.app.server.address() as { port: number }).port;
    const sock = connect(port, '127.0.0.1');
    sock.setEncoding('latin1');
    let text = '';
    sock.on('data', (d: string) => { text += d; });
    sock.write('POST /api/user/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"user');
    const closed = await new Promise<boolean>((resolve) => {
      sock.on('close', () => resolve(true));
      setTimeout(() => resolve(false), 10_000).unref();
    });
    sock.destroy();
    await quick.close();
    expect(closed).toBe(true);
    expect(text).toMatch(/^HTTP\/1\.1 408/);
    expect(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4))).toEqual({ success: false, message: 'the request took too long to arrive' });
  }, 30_000);
});

describe('requests Node would refuse with a bare answer', () => {
  /** Writes raw bytes to a listening console and reads until it closes the connection. */
  async function raw(bytes: string): Promise<string> {
    const app = await startConsoleHarness();
    try {
      if (app.app.server.address() === null) await app.app.listen({ port: 0, host: '127.0.0.1' });
      const sock = connect((app.app.server.address() as { port: number }).port, '127.0.0.1');
      sock.setEncoding('latin1');
      let text = '';
      sock.on('data', (d: string) => { text += d; });
      sock.write(bytes);
      await new Promise<void>((resolve) => {
        sock.on('close', () => resolve());
        setTimeout(() => { sock.destroy(); resolve(); }, 5_000).unref();
      });
      return text;
    } finally {
      await app.close();
    }
  }

  it('an HTTP/1.1 request without Host: 400 in the envelope', async () => {
    const text = await raw('GET /api/status HTTP/1.1\r\nConnection: close\r\n\r\n');
    expect(text).toMatch(/^HTTP\/1\.1 400/);
    expect(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4))).toEqual({ success: false, message: 'the request is not valid HTTP' });
  });

  it('an Expect other than 100-continue: 417 in the envelope', async () => {
    const text = await raw('POST /api/user/login HTTP/1.1\r\nHost: x\r\nExpect: foo\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}');
    expect(text).toMatch(/^HTTP\/1\.1 417/);
    expect(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4))).toEqual({ success: false, message: 'only "Expect: 100-continue" is understood' });
  });

  it('a CONNECT request: 404 in the envelope, as other methods on no route (Node closed the connection unanswered)', async () => {
    for (const target of ['/api/user/self', '127.0.0.1:443']) {
      const text = await raw(`CONNECT ${target} HTTP/1.1\r\nHost: x\r\n\r\n`);
      expect(text, target).toMatch(/^HTTP\/1\.1 404/);
      expect(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4))).toEqual({ success: false, message: 'no such endpoint' });
    }
  });

  it('two different Authorization headers: 401 saying so (Node kept the first, and the request was served as its account)', async () => {
    const text = await raw('GET /api/user/self HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer aaaa\r\nauthorization: Bearer bbbb\r\nConnection: close\r\n\r\n');
    expect(text).toMatch(/^HTTP\/1\.1 401/);
    expect(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4))).toEqual({ success: false, message: 'the request carries two different Authorization headers: send one' });
    // The same credential twice is one credential.
    const same = await raw('GET /api/status HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer aaaa\r\nAuthorization: Bearer aaaa\r\nConnection: close\r\n\r\n');
    expect(same).toMatch(/^HTTP\/1\.1 200/);
  });

  it('a well-formed escape of bytes that are not UTF-8 in the query string is the route\'s to read (a payment provider\'s GBK)', async () => {
    const text = await raw('GET /api/status?name=%C4%E3%BA%C3 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    expect(text).toMatch(/^HTTP\/1\.1 200/);
  });

  it('HTTP/1.0 without Host is still served', async () => {
    const text = await raw('GET /api/status HTTP/1.0\r\n\r\n');
    expect(text).toMatch(/^HTTP\/1\.1 200/);
  });
});

describe('validation messages', () => {
  it('a required field left out says "is required", not the type it should have had', async () => {
    const noName = await inject('POST', '/api/token/', user, { expired_time: -1, remain_quota: 0, unlimited_quota: true });
    expect(noName.json()).toEqual({ success: false, message: 'name: is required' });
    const noPassword = await inject('POST', '/api/user/login', undefined, { username: 'someone' });
    expect(noPassword.json()).toEqual({ success: false, message: 'password: is required' });
    // A field that is there with the wrong type still says the type.
    const wrongType = await inject('POST', '/api/user/login', undefined, { username: 'someone', password: 5 });
    expect(wrongType.json()).toEqual({ success: false, message: 'password: must be a string' });
    const nullName = await inject('POST', '/api/token/', user, { name: null, expired_time: -1, remain_quota: 0, unlimited_quota: true });
    expect(nullName.json().message).toMatch(/^name: must be a string/);
  });

  it('no message carries the schema library\'s own wording, and a field is named once', async () => {
    for (const [method, url, payload] of [
      ['GET', '/api/token/9007199254740993', undefined], ['GET', '/api/token/?keyword=a&keyword=b', undefined],
      ['POST', '/api/token/', []], ['POST', '/api/token/', { name: 'x'.repeat(60), expired_time: 'soon', remain_quota: -5, unlimited_quota: 'yes' }],
    ] as const) {
      const res = await inject(method, url, user, payload);
      expect(res.statusCode, url).toBe(400);
      const message: string = res.json().message;
      expect(message, `${method} ${url}`).not.toMatch(/Too big|Too small|Invalid input|expected \w+, received/);
      const fields = message.split('; ').map((part) => part.split(':')[0]);
      expect(new Set(fields).size, message).toBe(fields.length);
    }
    expect((await inject('POST', '/api/token/', user, [])).json()).toEqual({ success: false, message: 'body: must be a JSON object' });
    expect((await inject('GET', '/api/token/?keyword=a&keyword=b', user)).json()).toEqual({ success: false, message: 'keyword: must be given once, as a string' });
    // An integer too (before: "must be an integer (decimal digits only)" of two well-formed values).
    expect((await inject('GET', '/api/log/self?p=1&p=2', user)).json()).toEqual({ success: false, message: 'p: must be given once, as an integer' });
    expect((await inject('GET', '/api/token/?p=1&p=2', user)).json()).toEqual({ success: false, message: 'p: must be given once, as an integer' });
    expect((await inject('GET', '/api/log/self/daily?days=1&days=2', user)).json()).toEqual({ success: false, message: 'days: must be given once, as an integer' });
  });

  it('a query integer of many digits is read as the large number it is: page_size served as 100, p refused at its bound', async () => {
    const huge = '9'.repeat(30);
    const page = await inject('GET', `/api/token/?page_size=${huge}`, user);
    expect(page.statusCode, page.body).toBe(200);
    expect(page.json().data.page_size).toBe(100);
    expect((await inject('GET', `/api/token/?p=${huge}`, user)).json()).toEqual({ success: false, message: 'p: must be at most 1000000' });
    expect((await inject('GET', `/api/log/self?start_timestamp=${huge}`, user)).json().message).toMatch(/^start_timestamp: must be at most \d+$/);
  });
});
