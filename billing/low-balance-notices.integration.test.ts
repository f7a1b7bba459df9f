// Low-balance notices end to end on real Postgres and Redis: preferences set through PUT
// /api/user/setting, settlements applied by the billing worker's own batch code, notices delivered to a
// local webhook receiver and a local SMTP sink started here. One notice per crossing of the threshold,
// again only after a credit raised the balance above it, at most one per account per hour; failures
// retried; billing never waits for it; a receiver dripping its answer holds no pass beyond the deadline.
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWebhookSecretSealer } from '../core/notices/notice-setting.js';
import { createOptionSealer } from '../core/options/option-secrets.js';
import { appendUsageEvent, encodeUsageEvent, LOG_TYPE, usageEvent } from '../core/usage/usage-event.js';
import { createLogger } from '../infra/logger.js';
import { type ConsoleHarness, startConsoleHarness, type TestAccount } from '../tests/harness/console-harness.js';
import { mailText, type SmtpSink, startSmtpSink } from '../tests/harness/smtp-sink.js';
import { deliverLowBalanceNotices, NOTICE_MAX_ATTEMPTS, NOTICE_MIN_INTERVAL_SEC, NOTICE_TIMEOUT_MS, webhookSignature } from './low-balance-notices.js';

interface Received {
  headers: IncomingMessage['headers'];
  body: string;
}

let h: ConsoleHarness;
let sink: SmtpSink;
let receiver: Server;
let receiverUrl = '';
const received: Received[] = [];
/** An account's own receiver that answers 200 at once, then one body byte every 2 s (never idle for bodyTimeout). */
let dripper: Server;
let dripUrl = '';
const dripping: { res: ServerResponse; timer: NodeJS.Timeout }[] = [];
const stopDripping = () => { for (const d of dripping.splice(0)) { clearInterval(d.timer); d.res.destroy(); } };
/** What the receiver does with the next requests: answer 204, fail with 500, or never answer. */
let mode: 'ok' | 'fail' | 'hang' = 'ok';
const hanging: ServerResponse[] = [];
const SECRET = 'a-webhook-secret-of-some-length';

beforeAll(async () => {
  sink = await startSmtpSink();
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (mode === 'hang') return void hanging.push(res);
      received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.statusCode = mode === 'ok' ? 204 : 500;
      res.end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
  dripper = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('x');
      dripping.push({ res, timer: setInterval(() => res.write('x'), 2_000) });
    });
  });
  await new Promise<void>((r) => dripper.listen(0, '127.0.0.1', r));
  dripUrl = `http://127.0.0.1:${(dripper.address() as AddressInfo).port}/hook`;
  h = await startConsoleHarness();
  for (const [key, value] of [['SMTPServer', '127.0.0.1'], ['SMTPPort', String(sink.port)]]) {
    await h.sql`INSERT INTO options (key, value) VALUES (${key!}, ${value!}) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`;
  }
});
afterAll(async () => {
  for (const res of hanging) res.destroy();
  stopDripping();
  await new Promise((r) => dripper?.close(r));
  await h?.close();
  await sink?.close();
  await new Promise((r) => receiver?.close(r));
});

const log = () => createLogger(h.config, 'test-notices');
const deliver = () => deliverLowBalanceNotices({
  sql: h.sql, log: log(), optionSecrets: createOptionSealer(h.config.KEY_SECRET), webhookSecrets: createWebhookSecretSealer(h.config.KEY_SECRET),
});

/** A settled request of `quota` for the account, as the relay appends it; the billing worker's batch code applies it. */
async function spend(userId: number, ...amounts: number[]): Promise<void> {
  for (const quota of amounts) {
    const e = usageEvent({ type: LOG_TYPE.consume, request_id: `req-${randomUUID()}`, user_id: userId, created_at: Math.floor(Date.now() / 1000), content: 'test', quota, model_name: 'm' });
    await appendUsageEvent(h.redis, h.keys.usageStream(), encodeUsageEvent(e));
  }
  await h.drainUsageStream();
}

/** Moves the account's notices an hour back, past the per-account limit. */
async function ageNotices(userId: number): Promise<void> {
  await h.sql`UPDATE balance_notices SET created_at = created_at - ${NOTICE_MIN_INTERVAL_SEC} WHERE user_id = ${userId}`;
}

async function notices(userId: number) {
  return h.sql<{ id: number; balance: number; threshold: number; attempts: number; sent_at: Date | null; failed_at: Date | null; last_error: string }[]>`
    SELECT id, balance, threshold, attempts, sent_at, failed_at, last_error FROM balance_notices WHERE user_id = ${userId} ORDER BY id`;
}

const setting = (a: TestAccount, body: Record<string, unknown>) =>
  h.app.inject({ method: 'PUT', url: '/api/user/setting', payload: body, headers: a.auth });

async function setOption(key: string, value: boolean): Promise<void> {
  await h.sql`INSERT INTO options (key, value) VALUES (${key}, ${String(value)}) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`;
}

/** Notices may go to the local receiver: the root option of webhooks, not the channels' one. */
async function allowPrivate(on: boolean): Promise<void> {
  await setOption('WebhookAllowPrivateNetworks', on);
}

describe('PUT /api/user/setting', () => {
  it('validates the preferences, follows the channels\' address rule, and never shows the secret back', async () => {
    const a = await h.account();
    await allowPrivate(false);
    const local = await setting(a, { notify_type: 'webhook', quota_warning_threshold: 100, webhook_url: receiverUrl, webhook_secret: SECRET });
    expect(local.statusCode).toBe(400);
    expect(local.json().message).toMatch(/^webhook_url: 127\.0\.0\.1 is a private, loopback or link-local address/);
    await allowPrivate(true);
    expect((await setting(a, { notify_type: 'webhook', quota_warning_threshold: 100, webhook_url: 'ftp://x/' , webhook_secret: SECRET })).json().message).toMatch(/^webhook_url: /);
    expect((await setting(a, { notify_type: 'webhook', quota_warning_threshold: 100, webhook_url: receiverUrl, webhook_secret: 'short' })).json().message)
      .toBe('webhook_secret: must be at least 16 characters (it signs each notice)');
    expect((await setting(a, { notify_type: 'sms', quota_warning_threshold: 100 })).statusCode).toBe(400);
    expect((await setting(a, { notify_type: 'email', quota_warning_threshold: -1 })).json().message).toMatch(/^quota_warning_threshold: /);
    expect((await setting(a, { notify_type: 'email', quota_warning_threshold: 100 })).json().message).toMatch(/^notify_type: e-mail notices go to the bound e-mail address/);

    expect((await setting(a, { notify_type: 'webhook', quota_warning_threshold: 100, webhook_url: receiverUrl, webhook_secret: SECRET })).statusCode).toBe(200);
    const shown = JSON.parse((await h.app.inject({ method: 'GET', url: '/api/user/self', headers: a.auth })).json().data.setting);
    expect(shown).toMatchObject({ notify_type: 'webhook', quota_warning_threshold: 100, webhook_url: receiverUrl, webhook_secret: '', webhook_secret_set: true });
    // Sent back as shown (secret blank, same URL): the stored secret is kept.
    expect((await setting(a, { ...shown, quota_warning_threshold: 200 })).statusCode).toBe(200);
    const [row] = await h.sql<{ setting: string }[]>`SELECT setting FROM users WHERE id = ${a.user.id}`;
    // Kept sealed (notice-webhook-secret.integration.test.ts).
    expect(JSON.parse(row!.setting)).toMatchObject({ quota_warning_threshold: 200, webhook_secret: expect.stringMatching(/^sealed:v1:/) });
  });
});

describe('private webhook targets', () => {
  it('are not opened to every account by the channels\' option: ChannelAllowPrivateNetworks on, a private webhook_url is still refused and never called', async () => {
    await allowPrivate(false);
    await setOption('ChannelAllowPrivateNetworks', true);
    try {
      const a = await h.account({ quota: 1_000 });
      for (const url of [receiverUrl, 'http://169.254.169.254/latest/meta-data/', 'http://127.0.0.1:8123/?query=SELECT%201']) {
        const refused = await setting(a, { notify_type: 'webhook', quota_warning_threshold: 900, webhook_url: url, webhook_secret: SECRET });
        expect(refused.statusCode, url).toBe(400);
        expect(refused.json().message, url).toMatch(/^webhook_url: .*private, loopback or link-local address.*WebhookAllowPrivateNetworks/);
      }
      // A setting stored while the webhook option was on is not called once it is off.
      await allowPrivate(true);
      expect((await setting(a, { notify_type: 'webhook', quota_warning_threshold: 900, webhook_url: receiverUrl, webhook_secret: SECRET })).statusCode).toBe(200);
      await allowPrivate(false);
      received.length = 0;
      await spend(a.user.id, 200);
      expect(await deliver()).toBe(0);
      expect(received).toHaveLength(0);
      expect((await notices(a.user.id))[0]!.last_error).toMatch(/private, loopback or link-local/);
      // Not retried by the later tests' passes (the receiver is allowed again there).
      await h.sql`UPDATE balance_notices SET failed_at = now() WHERE user_id = ${a.user.id}`;
    } finally {
      await setOption('ChannelAllowPrivateNetworks', false);
    }
  });
});

describe('a settlement crossing the threshold', () => {
  it('queues one signed webhook notice per crossing, again only after the balance rose above it', async () => {
    await allowPrivate(true);
    const a = await h.account({ quota: 10_000 });
    expect((await setting(a, { notify_type: 'webhook', quota_warning_threshold: 5_000, webhook_url: receiverUrl, webhook_secret: SECRET })).statusCode).toBe(200);

    await spend(a.user.id, 3_000); // 7,000: above
    expect(await notices(a.user.id)).toHaveLength(0);
    await spend(a.user.id, 1_500, 1_500); // 4,000 in one batch: one crossing
    await spend(a.user.id, 1_000); // 3,000: still below, no second notice
    const queued = await notices(a.user.id);
    expect(queued).toEqual([expect.objectContaining({ balance: 4_000, threshold: 5_000, sent_at: null })]);

    received.length = 0;
    expect(await deliver()).toBe(1);
    expect(received).toHaveLength(1);
    const r = received[0]!;
    expect(JSON.parse(r.body)).toMatchObject({ type: 'quota_warning', user_id: a.user.id, quota: 4_000, quota_warning_threshold: 5_000 });
    expect(r.headers['x-webhook-signature']).toBe(webhookSignature(SECRET, String(r.headers['x-webhook-timestamp']), r.body));
    expect(r.body).not.toContain(SECRET);
    expect((await notices(a.user.id))[0]!.sent_at).not.toBeNull();
    expect(await deliver()).toBe(0);

    // A credit raises the balance above the threshold; within the hour the next crossing queues nothing
    // (the per-account limit), and is not sent later either.
    await h.sql`UPDATE users SET quota = quota + 10000 WHERE id = ${a.user.id}`;
    await spend(a.user.id, 8_500); // 13,000 → 4,500
    expect((await notices(a.user.id)).map((n) => n.balance)).toEqual([4_000]);
    // An hour after the last notice, a credit and a crossing notify again.
    await ageNotices(a.user.id);
    await h.sql`UPDATE users SET quota = quota + 10000 WHERE id = ${a.user.id}`;
    await spend(a.user.id, 10_000); // 14,500 → 4,500
    expect((await notices(a.user.id)).map((n) => n.balance)).toEqual([4_000, 4_500]);
    expect(await deliver()).toBe(1);
  });

  it('sends at most one notice per account per hour: lowering the threshold before each 1-quota request does not make a stream of POSTs', async () => {
    await allowPrivate(true);
    const a = await h.account({ quota: 100_000 });
    received.length = 0;
    let balance = 100_000;
    for (let i = 0; i < 10; i++) {
      // Threshold at the current balance, then the cheapest settled request crosses it.
      expect((await setting(a, { notify_type: 'webhook', quota_warning_threshold: balance, webhook_url: receiverUrl, webhook_secret: SECRET })).statusCode).toBe(200);
      await spend(a.user.id, 1);
      balance -= 1;
      if (i === 4) expect(await deliver()).toBe(1); // the first one, sent mid-way
    }
    expect(await deliver()).toBe(0);
    // Ten crossings for 10 quota: one notice queued and one POST; the nine suppressed are never sent.
    expect((await notices(a.user.id)).map((n) => n.balance)).toEqual([99_999]);
    expect(received.filter((r) => JSON.parse(r.body).user_id === a.user.id)).toHaveLength(1);
    // An account's limit is its own: another account's crossing meanwhile is notified.
    const b = await h.account({ quota: 1_000 });
    expect((await setting(b, { notify_type: 'webhook', quota_warning_threshold: 900, webhook_url: receiverUrl, webhook_secret: SECRET })).statusCode).toBe(200);
    await spend(b.user.id, 200);
    expect(await deliver()).toBe(1);
  });

  it('retries a failing webhook with a growing delay and gives up after the last attempt', async () => {
    await allowPrivate(true);
    const a = await h.account({ quota: 1_000 });
    await setting(a, { notify_type: 'webhook', quota_warning_threshold: 900, webhook_url: receiverUrl, webhook_secret: SECRET });
    await spend(a.user.id, 200);
    mode = 'fail';
    try {
      expect(await deliver()).toBe(0);
      const [first] = await notices(a.user.id);
      expect(first).toMatchObject({ attempts: 1, sent_at: null, failed_at: null, last_error: 'webhook answered HTTP 500' });
      const [delay] = await h.sql<{ s: number }[]>`SELECT EXTRACT(EPOCH FROM next_attempt_at - now())::int AS s FROM balance_notices WHERE id = ${first!.id}`;
      expect(delay!.s).toBeGreaterThan(20);
      // Not due yet: the next pass leaves it alone.
      expect(await deliver()).toBe(0);
      expect((await notices(a.user.id))[0]!.attempts).toBe(1);
      for (let i = 2; i <= NOTICE_MAX_ATTEMPTS; i++) {
        await h.sql`UPDATE balance_notices SET next_attempt_at = now() WHERE id = ${first!.id}`;
        await deliver();
      }
      expect((await notices(a.user.id))[0]).toMatchObject({ attempts: NOTICE_MAX_ATTEMPTS, sent_at: null, failed_at: expect.any(Date) });
      await h.sql`UPDATE balance_notices SET next_attempt_at = now() WHERE id = ${first!.id}`;
      expect(await deliver()).toBe(0);
      expect((await notices(a.user.id))[0]!.attempts).toBe(NOTICE_MAX_ATTEMPTS);
    } finally {
      mode = 'ok';
    }

    // A second crossing (an hour later: the per-account limit) succeeds on its retry.
    await ageNotices(a.user.id);
    await h.sql`UPDATE users SET quota = 1000 WHERE id = ${a.user.id}`;
    mode = 'fail';
    await spend(a.user.id, 200);
    await deliver();
    mode = 'ok';
    const second = (await notices(a.user.id))[1]!;
    await h.sql`UPDATE balance_notices SET next_attempt_at = now() WHERE id = ${second.id}`;
    expect(await deliver()).toBe(1);
    expect((await notices(a.user.id))[1]).toMatchObject({ attempts: 2, sent_at: expect.any(Date) });
  });

  it('settles while the webhook hangs: the notice waits, the money does not', async () => {
    await allowPrivate(true);
    const a = await h.account({ quota: 1_000 });
    await setting(a, { notify_type: 'webhook', quota_warning_threshold: 900, webhook_url: receiverUrl, webhook_secret: SECRET });
    mode = 'hang';
    try {
      const pending = deliver();
      await spend(a.user.id, 200);
      await pending;
      const delivering = deliver(); // claims the new notice and waits on the receiver
      // Billing goes on meanwhile: the next settlement lands while the notice is still in flight.
      await spend(a.user.id, 100);
      const [u] = await h.sql<{ quota: number }[]>`SELECT quota FROM users WHERE id = ${a.user.id}`;
      expect(Number(u!.quota)).toBe(700);
      expect(await notices(a.user.id)).toEqual([expect.objectContaining({ sent_at: null, attempts: 1 })]);
      expect(await delivering).toBe(0);
      expect((await notices(a.user.id))[0]!.last_error).toMatch(/timeout/i);
    } finally {
      mode = 'ok';
    }
  });

  it('is bounded in time: a receiver dripping its answer holds the pass no longer than the deadline, and the batch\'s other notices are recorded at once', async () => {
    await allowPrivate(true);
    const attacker = await h.account({ quota: 1_000 });
    const other = await h.account({ quota: 1_000 });
    expect((await setting(attacker, { notify_type: 'webhook', quota_warning_threshold: 900, webhook_url: dripUrl, webhook_secret: SECRET })).statusCode).toBe(200);
    expect((await setting(other, { notify_type: 'webhook', quota_warning_threshold: 900, webhook_url: receiverUrl, webhook_secret: SECRET })).statusCode).toBe(200);
    await spend(attacker.user.id, 200);
    await spend(other.user.id, 200);
    received.length = 0;
    try {
      const started = Date.now();
      let finishedAt = 0;
      const pass = deliver().finally(() => { finishedAt = Date.now(); });
      // Well inside the deadline, the other account's notice is already recorded as sent (not left for
      // another worker to claim again after 30 s), while the dripping one is still being answered.
      await new Promise((r) => setTimeout(r, NOTICE_TIMEOUT_MS / 2));
      const [otherNotice] = await notices(other.user.id);
      expect({ finished: finishedAt !== 0, otherSent: otherNotice!.sent_at !== null }).toEqual({ finished: false, otherSent: true });
      // The whole pass ends at the deadline (one byte every 2 s would otherwise last 131072 × 2 s).
      const outcome = await Promise.race([pass.then(() => 'finished'), new Promise((r) => setTimeout(() => r('still running'), 3 * NOTICE_TIMEOUT_MS))]);
      expect(outcome).toBe('finished');
      expect(finishedAt - started).toBeLessThan(NOTICE_TIMEOUT_MS + 2_000);
      expect(received.filter((r) => JSON.parse(r.body).user_id === other.user.id)).toHaveLength(1);
      // The dripping receiver did answer 200: its notice counts as sent, its body was cut off.
      expect((await notices(attacker.user.id))[0]).toMatchObject({ attempts: 1, sent_at: expect.any(Date) });
    } finally {
      stopDripping();
    }
  }, 60_000);

  it('sends an e-mail notice to the bound address', async () => {
    const a = await h.account({ quota: 50_000 });
    const address = `low-${a.user.id}@example.test`;
    await h.sql`UPDATE users SET email = ${address} WHERE id = ${a.user.id}`;
    const fresh = { ...a, auth: a.auth };
    expect((await setting(fresh, { notify_type: 'email', quota_warning_threshold: 40_000 })).statusCode).toBe(200);
    await spend(a.user.id, 20_000);
    expect(await deliver()).toBe(1);
    const text = mailText(await sink.next(address));
    expect(text).toContain('fell to 30000 quota');
    expect(text).toContain('threshold of 40000 quota');
  });
});
