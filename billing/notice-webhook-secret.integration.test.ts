// Accounts' webhook secrets at rest: a dump of `users` must not let anyone sign low-balance notices an
// account's receiver believes. PUT /api/user/setting stores the secret sealed under KEY_SECRET; the
// billing worker opens it to sign, and a receiver verifies with the secret it set. A secret stored in
// clear by an earlier version still signs, and is sealed by the console's start-up step or the next PUT.
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWebhookSecretSealer } from '../core/notices/notice-setting.js';
import { createOptionSealer } from '../core/options/option-secrets.js';
import { appendUsageEvent, encodeUsageEvent, LOG_TYPE, usageEvent } from '../core/usage/usage-event.js';
import { createLogger } from '../infra/logger.js';
import { sealLegacySecrets } from '../console-api/secrets/seal-legacy-secrets.js';
import { type ConsoleHarness, startConsoleHarness, type TestAccount } from '../tests/harness/console-harness.js';
import { deliverLowBalanceNotices, NOTICE_MIN_INTERVAL_SEC, webhookSignature } from './low-balance-notices.js';

let h: ConsoleHarness;
let receiver: Server;
let receiverUrl = '';
const received: { headers: IncomingMessage['headers']; body: string }[] = [];
const SECRET = 'a-webhook-secret-kept-sealed';

beforeAll(async () => {
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.statusCode = 204;
      res.end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
  h = await startConsoleHarness();
  await h.sql`INSERT INTO options (key, value) VALUES ('WebhookAllowPrivateNetworks', 'true') ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`;
});
afterAll(async () => {
  await h?.close();
  await new Promise((r) => receiver?.close(r));
});

const sealers = () => ({ options: createOptionSealer(h.config.KEY_SECRET), webhooks: createWebhookSecretSealer(h.config.KEY_SECRET) });
const deliver = () => deliverLowBalanceNotices({ sql: h.sql, log: createLogger(h.config, 'test-notices'), optionSecrets: sealers().options, webhookSecrets: sealers().webhooks });
const setting = (a: TestAccount, body: Record<string, unknown>) =>
  h.app.inject({ method: 'PUT', url: '/api/user/setting', payload: body, headers: a.auth });
const storedSetting = async (userId: number) => (await h.sql<{ setting: string }[]>`SELECT setting FROM users WHERE id = ${userId}`)[0]!.setting;

/** Takes the balance from 10,000 to 4,000 across a threshold of 5,000 and delivers the notice; returns what the receiver got. */
async function crossAndDeliver(userId: number) {
  // The account's earlier notices an hour back: past the one-per-hour limit.
  await h.sql`UPDATE balance_notices SET created_at = created_at - ${NOTICE_MIN_INTERVAL_SEC} WHERE user_id = ${userId}`;
  await h.sql`UPDATE users SET quota = 10000 WHERE id = ${userId}`;
  const e = usageEvent({ type: LOG_TYPE.consume, request_id: `req-${randomUUID()}`, user_id: userId, created_at: Math.floor(Date.now() / 1000), content: 'test', quota: 6_000, model_name: 'm' });
  await appendUsageEvent(h.redis, h.keys.usageStream(), encodeUsageEvent(e));
  await h.drainUsageStream();
  received.length = 0;
  expect(await deliver()).toBe(1);
  expect(received).toHaveLength(1);
  return received[0]!;
}

const signedWith = (secret: string, r: { headers: IncomingMessage['headers']; body: string }) =>
  r.headers['x-webhook-signature'] === webhookSignature(secret, String(r.headers['x-webhook-timestamp']), r.body);

describe('the webhook URL of low-balance notices', () => {
  // Review console: an administrator read the whole URL, token included, and could post into the
  // owner's channel with it.
  it('is shown whole to its account alone; an administrator sees its scheme and host', async () => {
    const a = await h.account();
    const admin = await h.account({ role: 10 });
    const url = 'https://93.184.216.34/api/webhooks/123456/SECRET-PATH-TOKEN?token=SECRET-QUERY';
    expect((await setting(a, { notify_type: 'webhook', quota_warning_threshold: 100, webhook_url: url, webhook_secret: 'w'.repeat(20) })).statusCode).toBe(200);
    const urlIn = (r: { json(): unknown }, pick: (data: never) => string) => JSON.parse(pick((r.json() as { data: never }).data)).webhook_url as string;
    const own = await h.app.inject({ method: 'GET', url: '/api/user/self', headers: a.auth });
    expect(urlIn(own, (d: { setting: string }) => d.setting)).toBe(url);
    const one = await h.app.inject({ method: 'GET', url: `/api/user/${a.user.id}`, headers: admin.auth });
    const listed = await h.app.inject({ method: 'GET', url: `/api/user/?keyword=${a.user.username}`, headers: admin.auth });
    expect(urlIn(one, (d: { setting: string }) => d.setting)).toBe('https://93.184.216.34/…');
    expect(urlIn(listed, (d: { items: Array<{ setting: string }> }) => d.items[0]!.setting)).toBe('https://93.184.216.34/…');
    for (const r of [one, listed]) expect(r.body).not.toContain('SECRET');
  });
});

describe('the webhook secret of low-balance notices', () => {
  it('is stored sealed, kept sealed when sent back blank, and signs notices the receiver verifies', async () => {
    const a = await h.account();
    const first = { notify_type: 'webhook', quota_warning_threshold: 5_000, webhook_url: receiverUrl, webhook_secret: SECRET };
    expect((await setting(a, first)).statusCode).toBe(200);
    const row = await storedSetting(a.user.id);
    expect(row).not.toContain(SECRET);
    expect(JSON.parse(row).webhook_secret).toMatch(/^sealed:v1:/);
    // Sent back blank with the same URL: the sealed secret is kept as it is.
    expect((await setting(a, { ...first, webhook_secret: '' })).statusCode).toBe(200);
    expect(JSON.parse(await storedSetting(a.user.id)).webhook_secret).toBe(JSON.parse(row).webhook_secret);

    const r = await crossAndDeliver(a.user.id);
    expect(signedWith(SECRET, r)).toBe(true);
    expect(r.body).not.toContain('sealed:v1:');
  });

  it('stored in clear by an earlier version, still signs and is sealed at start-up', async () => {
    const a = await h.account();
    const legacy = 'webhook-secret-stored-in-clear';
    await h.sql`UPDATE users SET setting = ${JSON.stringify({ notify_type: 'webhook', quota_warning_threshold: 5_000, webhook_url: receiverUrl, webhook_secret: legacy })} WHERE id = ${a.user.id}`;
    expect(signedWith(legacy, await crossAndDeliver(a.user.id))).toBe(true);

    expect((await sealLegacySecrets(h.sql, sealers())).accounts).toBeGreaterThanOrEqual(1);
    const row = await storedSetting(a.user.id);
    expect(row).not.toContain(legacy);
    expect(JSON.parse(row)).toMatchObject({ notify_type: 'webhook', quota_warning_threshold: 5_000, webhook_url: receiverUrl, webhook_secret: expect.stringMatching(/^sealed:v1:/) });
    expect(signedWith(legacy, await crossAndDeliver(a.user.id))).toBe(true);
    expect((await sealLegacySecrets(h.sql, sealers())).accounts).toBe(0);
  });

  it('stored in clear and kept by a PUT that sends it back blank, is sealed by that PUT', async () => {
    const a = await h.account();
    const legacy = 'another-secret-stored-in-clear';
    const before = { notify_type: 'webhook', quota_warning_threshold: 5_000, webhook_url: receiverUrl, webhook_secret: legacy };
    await h.sql`UPDATE users SET setting = ${JSON.stringify(before)} WHERE id = ${a.user.id}`;
    expect((await setting(a, { ...before, webhook_secret: '' })).statusCode).toBe(200);
    expect(await storedSetting(a.user.id)).not.toContain(legacy);
    expect(signedWith(legacy, await crossAndDeliver(a.user.id))).toBe(true);
  });

  it('sealed for one account, does not sign for another', async () => {
    const a = await h.account();
    const b = await h.account();
    expect((await setting(a, { notify_type: 'webhook', quota_warning_threshold: 5_000, webhook_url: receiverUrl, webhook_secret: SECRET })).statusCode).toBe(200);
    await h.sql`UPDATE users SET setting = ${await storedSetting(a.user.id)} WHERE id = ${b.user.id}`;
    await h.sql`UPDATE users SET quota = 10000 WHERE id = ${b.user.id}`;
    const e = usageEvent({ type: LOG_TYPE.consume, request_id: `req-${randomUUID()}`, user_id: b.user.id, created_at: Math.floor(Date.now() / 1000), content: 'test', quota: 6_000, model_name: 'm' });
    await appendUsageEvent(h.redis, h.keys.usageStream(), encodeUsageEvent(e));
    await h.drainUsageStream();
    received.length = 0;
    expect(await deliver()).toBe(0);
    expect(received).toHaveLength(0);
    const [notice] = await h.sql<{ last_error: string }[]>`SELECT last_error FROM balance_notices WHERE user_id = ${b.user.id}`;
    expect(notice!.last_error).toMatch(/cannot be opened/);
  });
});
