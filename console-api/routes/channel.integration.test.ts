import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKeyCrypto } from '../../infra/secrets/api-key-crypto.js';
import { type ConsoleHarness, type TestAccount, startConsoleHarness, uniqueName } from '../../tests/harness/console-harness.js';

let h: ConsoleHarness;
let admin: TestAccount;
let root: TestAccount;
// A provider of the administrator's own: it echoes whatever it was sent (the channel key included).
let echo: Server;
let echoUrl = '';
// The channel test's whole-exchange deadline (CHANNEL_TEST_TIMEOUT_MS), short for the dripping upstream below.
const TEST_TIMEOUT_MS = 1500;
beforeAll(async () => {
  h = await startConsoleHarness({ CHANNEL_TEST_TIMEOUT_MS: String(TEST_TIMEOUT_MS) });
  admin = await h.account({ role: 10 });
  root = await h.account({ role: 100 });
  echo = createServer((req, res) => {
    res.writeHead(401, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ type: 'error', error: { type: 'authentication_error', message: `key ${String(req.headers['x-api-key'])} is not valid` } }));
  });
  await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
  echoUrl = `http://127.0.0.1:${(echo.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise((r) => echo?.close(r));
  await h?.close();
});

/** A local HTTP server for one test. */
async function startServer(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer(handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}

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
    const res = await create({ name: 'c2', base_url: 'https://c2.example.com', key: 'k', models: ['m1', 'm2', 'm1'], status: 2 });
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

const put = (payload: unknown, who: TestAccount = admin) =>
  h.app.inject({ method: 'PUT', url: '/api/channel/', payload: payload as object, headers: who.auth });
const setOption = (key: string, value: unknown, who: TestAccount = root) =>
  h.app.inject({ method: 'PUT', url: '/api/option/', payload: { key, value }, headers: who.auth });
const testChannel = (id: number) => h.app.inject({ method: 'GET', url: `/api/channel/test/${id}`, headers: admin.auth });

describe('channel targets: no private networks unless the root option allows them', () => {
  it.each([
    'http://127.0.0.1:8123', 'http://localhost:8123', 'http://0.0.0.0:8123', 'http://2130706433:8123', 'http://[::1]:8123',
    'http://[::ffff:127.0.0.1]:8123', 'http://[::]:80', 'http://169.254.169.254', 'http://[fe80::1]', 'http://10.0.0.5',
    'http://192.168.1.1', 'http://[fd00::1]', 'http://100.64.0.1',
  ])('refuses base_url %s with 400', async (baseUrl) => {
    const res = await create({ name: 'ssrf', base_url: baseUrl, key: 'k', models: 'm' });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual({ success: false, message: expect.stringMatching(/^base_url: .*private, loopback or link-local address; .*ChannelAllowPrivateNetworks/) });
  });

  it('ChannelAllowPrivateNetworks is root-only and lets a private base_url through', async () => {
    const refused = await setOption('ChannelAllowPrivateNetworks', true, admin);
    expect(refused.statusCode).toBe(403);
    expect((await setOption('ChannelAllowPrivateNetworks', true)).statusCode).toBe(200);
    try {
      expect((await create({ name: 'local', base_url: 'http://127.0.0.1:3090', key: 'k', models: 'm' })).statusCode).toBe(200);
    } finally {
      await setOption('ChannelAllowPrivateNetworks', false);
    }
  });

  it('refuses a private base_url on update too', async () => {
    const id = (await create({ name: 'pub', base_url: 'https://pub.example.com', key: 'k', models: 'm' })).json().data.id;
    const res = await put({ id, base_url: 'http://169.254.169.254', key: 'k2' });
    expect(res.statusCode).toBe(400);
    expect(res.json().message).toMatch(/^base_url: 169\.254\.169\.254 is a private, loopback or link-local address/);
  });
});

describe('channel credentials stay with their host', () => {
  it('a new base_url needs the key again; the same base_url or other fields do not', async () => {
    const id = (await create({ name: 'cred', base_url: 'https://one.example.com/', key: 'the-stored-key', models: 'm' })).json().data.id;
    const moved = await put({ id, base_url: 'https://attacker.example.net' });
    expect(moved.statusCode).toBe(400);
    expect(moved.json()).toEqual({ success: false, message: 'key: is required when base_url changes (the stored key is only sent to the host it was entered for)' });
    const [row] = await h.sql<{ base_url: string }[]>`SELECT base_url FROM channels WHERE id = ${id}`;
    expect(row!.base_url).toBe('https://one.example.com');
    // Unchanged (trailing slash aside) or untouched base_url: no key needed.
    expect((await put({ id, base_url: 'https://one.example.com/', name: 'renamed' })).statusCode).toBe(200);
    expect((await put({ id, weight: 7 })).statusCode).toBe(200);
    // With a new key, the move is allowed.
    const withKey = await put({ id, base_url: 'https://two.example.com', key: 'a-new-key' });
    expect(withKey.statusCode).toBe(200);
    expect(withKey.json().data.base_url).toBe('https://two.example.com');
  });
});

describe('channel base_url without credentials', () => {
  it('refuses a base_url carrying a user or password (shown to every administrator by the list), on creation and on update', async () => {
    for (const baseUrl of ['https://user:pw@a.example.com', 'https://user@a.example.com/v1', 'https://:pw@a.example.com']) {
      const res = await create({ name: 'with credentials', base_url: baseUrl, key: 'k', models: 'm' });
      expect(res.statusCode, baseUrl).toBe(400);
      expect(res.json()).toEqual({ success: false, message: 'base_url: must not carry credentials' });
    }
    expect((await h.sql`SELECT 1 FROM channels WHERE name = 'with credentials'`).length).toBe(0);
    const id = (await create({ name: 'plain address', base_url: 'https://a.example.com', key: 'k', models: 'm' })).json().data.id;
    const moved = await put({ id, base_url: 'https://user:pw@a.example.com', key: 'k2' });
    expect(moved.statusCode).toBe(400);
    expect(moved.json()).toEqual({ success: false, message: 'base_url: must not carry credentials' });
    const listed = (await h.app.inject({ method: 'GET', url: '/api/channel/?keyword=plain', headers: admin.auth })).json().data.items;
    expect(listed.map((c: { base_url: string }) => c.base_url)).toEqual(['https://a.example.com']);
  });

  it('refuses a base_url with a query or a fragment (the relay appends /v1/messages to it), on creation and on update', async () => {
    for (const baseUrl of ['http://a.example.com?x=1', 'https://a.example.com/v1?', 'https://a.example.com#f', 'https://a.example.com/#']) {
      const res = await create({ name: 'with query', base_url: baseUrl, key: 'k', models: 'm' });
      expect(res.statusCode, baseUrl).toBe(400);
      expect(res.json(), baseUrl).toEqual({ success: false, message: 'base_url: must not have a query (?) or a fragment (#): the API paths are appended to it' });
    }
    expect((await h.sql`SELECT 1 FROM channels WHERE name = 'with query'`).length).toBe(0);
    const id = (await create({ name: 'queryless address', base_url: 'https://b.example.com/proxy', key: 'k', models: 'm' })).json().data.id;
    const moved = await put({ id, base_url: 'https://b.example.com/proxy?token=1', key: 'k2' });
    expect(moved.statusCode).toBe(400);
    const [row] = await h.sql<{ base_url: string }[]>`SELECT base_url FROM channels WHERE id = ${id}`;
    expect(row!.base_url).toBe('https://b.example.com/proxy');
  });

  it('refuses a blank name as an empty one, as API keys and redemption codes do', async () => {
    for (const name of ['', '   ']) {
      const res = await create({ name, base_url: 'https://a.example.com', key: 'k', models: 'm' });
      expect(res.json()).toEqual({ success: false, message: 'name: is required' });
    }
  });

  // A key is sent as a header value: with a line break (pasted with its newline; new-api's one key a
  // line) or a character outside Latin-1, every request failed in the relay before it left, answered
  // 500 without trying the next channel (review route).
  it('takes a key pasted with blanks around it as the key, and refuses one a header cannot carry', async () => {
    const res = await create({ name: uniqueName('ch'), base_url: 'https://a.example.com', key: '  sk-ant-pasted-key\n', models: 'm-pasted' });
    expect(res.statusCode, res.body).toBe(200);
    const [ch] = await h.sql<{ key_ciphertext: Buffer }[]>`SELECT key_ciphertext FROM channels WHERE id = ${res.json().data.id}`;
    expect(createApiKeyCrypto(h.config.KEY_SECRET).open(ch!.key_ciphertext)).toBe('sk-ant-pasted-key');
    for (const [key, why] of [['sk-one\nsk-two', /one key on one line/], ['sk-a\tb', /one key on one line/], ['sk-ключ', /Latin-1/]] as const) {
      const bad = await create({ name: uniqueName('ch'), base_url: 'https://a.example.com', key, models: 'm-bad' });
      expect(bad.statusCode, key).toBe(400);
      expect(bad.json().message).toMatch(why);
    }
  });

  it('refuses credentials in the address options too (TopUpLink is shown to every account)', async () => {
    for (const key of ['TopUpLink', 'ServerAddress', 'PayAddress', 'CardpayApiAddress']) {
      const res = await h.app.inject({ method: 'PUT', url: '/api/option/', headers: root.auth, payload: { key, value: 'https://user:pw@pay.example.com' } });
      expect(res.statusCode, key).toBe(400);
      expect(res.json()).toEqual({ success: false, message: `value (${key}): must not carry credentials` });
    }
  });
  // Paths are appended to these as to a channel's base_url (payments/, routes/topup.ts): with a query
  // or a fragment the epay form went to `https://epay.example.com#x/submit.php` (the host's root) and
  // the notify URL to `https://pay.example.com/?a=1/api/user/epay/notify`, so a paid order was never
  // credited automatically. TopUpLink is only a link: its query stays allowed.
  it('refuses a query or a fragment in the address options that paths are appended to, and keeps the stored value', async () => {
    for (const key of ['ServerAddress', 'PayAddress', 'CardpayApiAddress']) {
      const before = (await h.sql<{ value: string }[]>`SELECT value FROM options WHERE key = ${key}`)[0]?.value;
      for (const value of ['https://pay.example.com/?a=1', 'https://pay.example.com?', 'https://pay.example.com#x', 'https://pay.example.com/base/#']) {
        const res = await h.app.inject({ method: 'PUT', url: '/api/option/', headers: root.auth, payload: { key, value } });
        expect(res.statusCode, `${key} ${value}`).toBe(400);
        expect(res.json()).toEqual({ success: false, message: `value (${key}): must not have a query (?) or a fragment (#): paths are appended to it` });
      }
      expect((await h.sql<{ value: string }[]>`SELECT value FROM options WHERE key = ${key}`)[0]?.value, key).toBe(before);
      const fine = await h.app.inject({ method: 'PUT', url: '/api/option/', headers: root.auth, payload: { key, value: 'https://pay.example.com/base/' } });
      expect(fine.statusCode, fine.body).toBe(200);
    }
    const link = await h.app.inject({ method: 'PUT', url: '/api/option/', headers: root.auth, payload: { key: 'TopUpLink', value: 'https://shop.example.com/buy?ref=gateway#top' } });
    expect(link.statusCode, link.body).toBe(200);
  });
});

describe('GET /api/channel/test/:id', () => {
  it('a failing upstream answers 200 success:false naming the status and error type, never the upstream body', async () => {
    expect((await setOption('ChannelAllowPrivateNetworks', true)).statusCode).toBe(200);
    let id = 0;
    try {
      id = (await create({ name: 'echo', base_url: echoUrl, key: 'sk-ant-secret-credential', models: 'claude-haiku-4-5' })).json().data.id;
      const res = await testChannel(id);
      expect(res.statusCode).toBe(200);
      expect(res.json()).toMatchObject({ success: false, message: 'channel test failed: HTTP 401 authentication_error', data: { status_code: 401, model: 'claude-haiku-4-5' } });
      expect(res.body).not.toContain('sk-ant-secret-credential');
      expect(res.body).not.toContain('is not valid');
    } finally {
      await setOption('ChannelAllowPrivateNetworks', false);
    }
    // The option off again: the stored private target is refused before anything is sent.
    const refused = await testChannel(id);
    expect(refused.statusCode).toBe(200);
    expect(refused.json()).toMatchObject({ success: false, message: expect.stringMatching(/^channel test refused: base_url 127\.0\.0\.1 is a private, loopback or link-local address/), data: { status_code: 0 } });
  });

  it('a connection failure answers 200 success:false with the error code only', async () => {
    expect((await setOption('ChannelAllowPrivateNetworks', true)).statusCode).toBe(200);
    try {
      const id = (await create({ name: 'closed', base_url: 'http://127.0.0.1:9', key: 'k', models: 'm' })).json().data.id;
      const res = await testChannel(id);
      expect(res.statusCode).toBe(200);
      expect(res.json()).toMatchObject({ success: false, message: 'channel test failed: ECONNREFUSED' });
    } finally {
      await setOption('ChannelAllowPrivateNetworks', false);
    }
  });

  it('an upstream that sends its headers and then drips its body is cut off at CHANNEL_TEST_TIMEOUT_MS: 200 success:false, timed out', async () => {
    // Headers at once, then one byte every 200 ms for 8 s: undici's idle timeouts never fire.
    const drip = await startServer((req, res) => {
      req.resume();
      res.writeHead(401, { 'content-type': 'application/json' });
      res.write('{');
      const started = Date.now();
      const t = setInterval(() => (Date.now() - started >= 8000 ? (clearInterval(t), res.end('}')) : res.write(' ')), 200);
      res.on('close', () => clearInterval(t));
    });
    expect((await setOption('ChannelAllowPrivateNetworks', true)).statusCode).toBe(200);
    try {
      const id = (await create({ name: 'drip', base_url: drip.url, key: 'k', models: 'm' })).json().data.id;
      const started = Date.now();
      const res = await testChannel(id);
      const took = Date.now() - started;
      expect(res.statusCode).toBe(200);
      expect(res.json()).toMatchObject({
        success: false, message: `channel test failed: timed out (no complete answer within ${TEST_TIMEOUT_MS} ms)`, data: { model: 'm' },
      });
      // The deadline held: well under the 8 s drip (generous margin over the 1.5 s deadline).
      expect(took).toBeLessThan(TEST_TIMEOUT_MS + 3500);
    } finally {
      await setOption('ChannelAllowPrivateNetworks', false);
      await drip.close();
    }
  }, 15_000);

  it.each(['constructor', 'toString', 'valueOf', '__proto__', 'hasOwnProperty'])(
    'a model named %s is tested as itself, not as an Object.prototype member', async (name) => {
      const bodies: string[] = [];
      const upstream = await startServer((req, res) => {
        let b = '';
        req.on('data', (c: Buffer) => (b += c.toString()));
        req.on('end', () => {
          bodies.push(b);
          res.writeHead(200, { 'content-type': 'application/json' }).end('{"type":"message","content":[],"usage":{"input_tokens":1,"output_tokens":1}}');
        });
      });
      expect((await setOption('ChannelAllowPrivateNetworks', true)).statusCode).toBe(200);
      try {
        // A mapping that maps another model only: the asked-for name has no entry of its own.
        const id = (await create({ name: 'proto', base_url: upstream.url, key: 'k', models: `m,${name}`, model_mapping: '{"m":"m2"}' })).json().data.id;
        const res = await h.app.inject({ method: 'GET', url: `/api/channel/test/${id}?model=${name}`, headers: admin.auth });
        expect(res.statusCode).toBe(200);
        expect(res.json()).toMatchObject({ success: true, data: { model: name } });
        expect(JSON.parse(bodies[0]!).model).toBe(name);
        // The mapping still applies to a model it names.
        const mapped = await h.app.inject({ method: 'GET', url: `/api/channel/test/${id}?model=m`, headers: admin.auth });
        expect(mapped.json().data.model).toBe('m2');
      } finally {
        await setOption('ChannelAllowPrivateNetworks', false);
        await upstream.close();
      }
    });
});

describe('channel integers fit their INT columns', () => {
  it.each([
    ['type', { type: 2 ** 31 }, /^type: must be 1 \(OpenAI Chat Completions\) or 14 \(Anthropic Messages\)/],
    ['weight', { weight: 2 ** 31 }, 'weight: must be at most 2147483647'],
    ['a huge priority', { priority: 2 ** 60 }, /^priority: /],
    ['a negative type', { type: -1 }, /^type: must be 1 /],
  ])('refuses %s with 400', async (_l, patch, message) => {
    const res = await create({ name: 'ints', base_url: 'https://x.example', key: 'k', models: 'm', ...patch });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ success: false, message: typeof message === 'string' ? message : expect.stringMatching(message) });
    const id = (await create({ name: 'ints-ok', base_url: 'https://x.example', key: 'k', models: 'm' })).json().data.id;
    const upd = await put({ id, ...patch });
    expect(upd.statusCode).toBe(400);
  });

  it('accepts the INT bounds themselves', async () => {
    const res = await create({ name: 'max', base_url: 'https://x.example', key: 'k', models: 'm', weight: 2 ** 31 - 1, priority: -(2 ** 40) });
    expect(res.statusCode, res.body).toBe(200);
  });
});

describe('channel health fields', () => {
  it('takes the automatic-disabling overrides and shows the status and probe record', async () => {
    const created = await create({ name: 'health', base_url: 'https://h.example.com', key: 'k', models: 'm', auto_ban: 0, fault_threshold: 2, fault_rate_threshold: 0.25 });
    expect(created.statusCode, created.body).toBe(200);
    const id = created.json().data.id as number;
    expect(created.json().data).toMatchObject({
      auto_ban: false, fault_threshold: 2, fault_rate_threshold: 0.25, status_reason: '', status_time: 0,
      probe_time: 0, probe_result: '', probe_failures: 0, next_probe_time: 0,
    });
    // null goes back to the fleet's setting; an omitted field stays.
    const updated = await put({ id, auto_ban: true, fault_threshold: null });
    expect(updated.json().data).toMatchObject({ auto_ban: true, fault_threshold: null, fault_rate_threshold: 0.25 });
    expect((await put({ id, fault_rate_threshold: 1.5 })).statusCode).toBe(400);
    expect((await put({ id, fault_threshold: -1 })).statusCode).toBe(400);
  });

  it('records an administrator\'s status change (reason, time) without a webhook notice, restarting the fault counts', async () => {
    const id = (await create({ name: 'manual', base_url: 'https://m.example.com', key: 'k', models: 'm' })).json().data.id as number;
    const res = await put({ id, status: 2 });
    expect(res.json().data).toMatchObject({ status: 2, status_reason: 'set by an administrator' });
    expect(res.json().data.status_time).toBeGreaterThan(0);
    const [row] = await h.sql<{ status_time: number; status_notified_time: number }[]>`SELECT status_time, status_notified_time FROM channels WHERE id = ${id}`;
    expect(Number(row!.status_notified_time)).toBe(Number(row!.status_time));
    // Other fields alone leave the status record as it is.
    const before = res.json().data.status_time;
    expect((await put({ id, weight: 3 })).json().data.status_time).toBe(before);
  });
});

describe('channel types the relay speaks (D2)', () => {
  it.each([0, 3, 24, 99, 2 ** 31 - 1])('refuses type %d with 400 listing the supported types, on create and update', async (type) => {
    const res = await create({ name: 'az', type, base_url: 'https://x.example', key: 'k', models: 'm' });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ success: false, message: 'type: must be 1 (OpenAI Chat Completions) or 14 (Anthropic Messages), the types the relay speaks' });
    const id = (await create({ name: 'ok', base_url: 'https://x.example', key: 'k', models: 'm' })).json().data.id as number;
    expect((await put({ id, type })).statusCode).toBe(400);
    expect((await h.app.inject({ method: 'GET', url: `/api/channel/${id}`, headers: admin.auth })).json().data.type).toBe(14);
  });

  it('accepts 1 and 14 (the default)', async () => {
    expect((await create({ name: 'oa', type: 1, base_url: 'https://x.example', key: 'k', models: 'm' })).json().data.type).toBe(1);
    expect((await create({ name: 'an', type: 14, base_url: 'https://x.example', key: 'k', models: 'm' })).json().data.type).toBe(14);
    expect((await create({ name: 'df', base_url: 'https://x.example', key: 'k', models: 'm' })).json().data.type).toBe(14);
  });

  it('leaves a stored channel of another type editable without its type', async () => {
    const id = (await create({ name: 'legacy', base_url: 'https://x.example', key: 'k', models: 'm' })).json().data.id as number;
    await h.sql`UPDATE channels SET type = 3 WHERE id = ${id}`;
    const res = await put({ id, weight: 7 });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().data).toMatchObject({ type: 3, weight: 7 });
  });
});

describe('new-api channel fields this console does not use (D1)', () => {
  it.each(['test_model', 'tag', 'other', 'status_code_mapping'])('refuses a %s value naming the field; accepts it empty or null', async (field) => {
    const base = { name: 'f', base_url: 'https://x.example', key: 'k', models: 'm' };
    const res = await create({ ...base, [field]: field === 'status_code_mapping' ? '{"429":"500"}' : 'x' });
    expect(res.statusCode).toBe(400);
    expect(res.json().message).toMatch(new RegExp(`^${field}: `));
    const id = (await create({ ...base, [field]: '' })).json().data.id as number;
    expect((await create({ ...base, [field]: null })).statusCode).toBe(200);
    expect((await put({ id, [field]: 'x' })).statusCode).toBe(400);
    expect((await put({ id, [field]: '' })).statusCode).toBe(200);
  });

  it('accepts new-api\'s form as it sends them: empty strings and an empty mapping', async () => {
    const res = await create({ name: 'newapi', base_url: 'https://x.example', key: 'k', models: 'm', test_model: '', tag: '', other: '', status_code_mapping: '{}' });
    expect(res.statusCode, res.body).toBe(200);
  });
});

describe('an administrator re-enabling an automatically disabled channel (nit)', () => {
  it.each([1, 2])('status %d clears the prober\'s schedule (next_probe_time 0, probe_failures 0)', async (status) => {
    const id = (await create({ name: 'auto', base_url: 'https://x.example', key: 'k', models: 'm' })).json().data.id as number;
    await h.sql`UPDATE channels SET status = 3, next_probe_time = 4102444800, probe_failures = 4, probe_time = 1700000000, probe_result = 'HTTP 401' WHERE id = ${id}`;
    const res = await put({ id, status });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().data).toMatchObject({ status, next_probe_time: 0, probe_failures: 0, status_reason: 'set by an administrator' });
  });

  it('status 3 set by an administrator is probed from now', async () => {
    const id = (await create({ name: 'auto3', base_url: 'https://x.example', key: 'k', models: 'm' })).json().data.id as number;
    const res = await put({ id, status: 3 });
    expect(res.json().data.next_probe_time).toBeGreaterThan(0);
  });
});
