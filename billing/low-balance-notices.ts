// Low-balance notices. An account that set a warning threshold and a channel (PUT /api/user/setting,
// core/notices/notice-setting.ts) gets one notice when a settlement takes its balance from at or above
// the threshold to below it: not one per request (the next settlements start below it), and again only
// after a credit raised the balance to the threshold or above and a settlement crossed it once more.
//
// Two steps, so that billing never waits for a notice:
//   1. queue: inside the settlement transaction (billing/settle-batch.ts), from the balances its UPDATE
//      returned, one balance_notices row per crossing (migration 012). It commits with the debit that
//      caused it, or not at all; no network call happens here;
//   2. deliver: a loop of the billing worker (startLowBalanceNotices) claims due rows (SKIP LOCKED, so
//      several workers share them), sends each by e-mail (core/email/mailer.ts) or by webhook, at most
//      NOTICE_BATCH at a time with a timeout each, and retries a failure with a growing delay, at most
//      NOTICE_MAX_ATTEMPTS times (then the row is marked failed, with its last error).
// A webhook follows the outbound-address rule (core/net/outbound-guard.ts) under its own root option,
// WebhookAllowPrivateNetworks (every account sets its URL, so the channels' option must not open it),
// and is signed: X-Webhook-Timestamp (Unix seconds) and
// X-Webhook-Signature: sha256=<hex HMAC-SHA256 of "<timestamp>.<body>" with the account's secret>.
// That secret and SMTPToken are stored sealed under KEY_SECRET and opened here, just before use.
import { createHmac } from 'node:crypto';
import { request } from 'undici';
import type { Logger } from '../infra/logger.js';
import type { Queryable, Sql } from '../infra/postgres/client.js';
import { loadSmtpSettings, sendMail } from '../core/email/mailer.js';
import { checkTarget, guardedAgent } from '../core/net/outbound-guard.js';
import { parseNoticeSetting, warningThreshold, type WebhookSecretSealer } from '../core/notices/notice-setting.js';
import type { OptionSealer } from '../core/options/option-secrets.js';
import { loadOptions } from '../core/options/options-source.js';
import { startPeriodicJob } from './periodic-job.js';

export const NOTICE_BATCH = 20;
export const NOTICE_MAX_ATTEMPTS = 5;
export const NOTICE_TIMEOUT_MS = 5_000;
/** Delay before the n-th retry: 30 s, 60 s, 120 s, 240 s. */
export const noticeRetryDelaySec = (attempt: number): number => 30 * 2 ** (attempt - 1);


/** What the settlement's UPDATE of users returned: the balance after the batch and the batch's debit. */
export interface SettledBalance {
  id: number | string;
  quota: number | string;
  debit: number | string;
  setting: string;
}

/** Step 1, inside the settlement transaction: a notice row for each balance that crossed its threshold. */
export async function queueLowBalanceNotices(tx: Queryable, balances: readonly SettledBalance[], nowSec: number): Promise<number> {
  const crossed: { userId: number; balance: number; threshold: number }[] = [];
  for (const b of balances) {
    if (!b.setting) continue;
    const threshold = warningThreshold(parseNoticeSetting(b.setting));
    if (threshold === undefined) continue;
    const after = Number(b.quota);
    const before = after + Number(b.debit);
    if (before >= threshold && after < threshold) crossed.push({ userId: Number(b.id), balance: after, threshold });
  }
  if (crossed.length === 0) return 0;
  await tx`
    INSERT INTO balance_notices (user_id, balance, threshold, created_at)
    SELECT * FROM unnest(${crossed.map((c) => c.userId)}::bigint[], ${crossed.map((c) => c.balance)}::bigint[],
                         ${crossed.map((c) => c.threshold)}::bigint[], ${crossed.map(() => nowSec)}::bigint[])`;
  return crossed.length;
}

interface ClaimedNotice {
  id: number;
  user_id: number;
  balance: number;
  threshold: number;
  created_at: number;
  attempts: number;
  username: string;
  email: string;
  setting: string;
}

export interface NoticeDeps {
  sql: Sql;
  log: Logger;
  /** Opens SMTPToken. */
  optionSecrets: OptionSealer;
  /** Opens the accounts' webhook secrets. */
  webhookSecrets: WebhookSecretSealer;
}

/** The body a webhook receives (JSON). */
export function noticePayload(n: Pick<ClaimedNotice, 'id' | 'user_id' | 'username' | 'balance' | 'threshold' | 'created_at'>): string {
  return JSON.stringify({
    type: 'quota_warning',
    notice_id: Number(n.id),
    user_id: Number(n.user_id),
    username: n.username,
    quota: Number(n.balance),
    quota_warning_threshold: Number(n.threshold),
    created_at: Number(n.created_at),
  });
}

export function webhookSignature(secret: string, timestamp: string, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`;
}

async function sendWebhook(url: string, secret: string, body: string, allowPrivate: boolean): Promise<void> {
  // Literals are checked here; names by the connection's own lookup (DNS rebinding included).
  if (!allowPrivate) await checkTarget(url);
  const agent = allowPrivate ? undefined : guardedAgent();
  const timestamp = String(Math.floor(Date.now() / 1000));
  try {
    const res = await request(url, {
      method: 'POST',
      body,
      headers: {
        'content-type': 'application/json',
        'user-agent': 'llm-gateway-notices',
        'x-webhook-timestamp': timestamp,
        'x-webhook-signature': webhookSignature(secret, timestamp, body),
      },
      headersTimeout: NOTICE_TIMEOUT_MS,
      bodyTimeout: NOTICE_TIMEOUT_MS,
      ...(agent ? { dispatcher: agent } : {}),
    });
    await res.body.dump();
    if (res.statusCode < 200 || res.statusCode >= 300) throw new Error(`webhook answered HTTP ${res.statusCode}`);
  } finally {
    await agent?.close();
  }
}

async function deliver(d: NoticeDeps, n: ClaimedNotice, allowPrivate: boolean): Promise<'sent' | 'skipped'> {
  const s = parseNoticeSetting(n.setting);
  if (warningThreshold(s) === undefined) return 'skipped';
  if (s.notify_type === 'webhook') {
    if (!s.webhook_url || !s.webhook_secret) return 'skipped';
    let secret: string;
    try {
      secret = d.webhookSecrets.open(Number(n.user_id), s.webhook_secret);
    } catch {
      throw new Error('the webhook secret cannot be opened with this KEY_SECRET (the account must set it again)');
    }
    await sendWebhook(s.webhook_url, secret, noticePayload(n), allowPrivate);
    return 'sent';
  }
  if (!n.email) return 'skipped';
  const smtp = await loadSmtpSettings(d.sql, d.optionSecrets);
  if (!smtp) throw new Error('e-mail is not configured (SMTPServer)');
  await sendMail(smtp, {
    to: n.email,
    subject: 'Your balance is low',
    text: `The balance of ${n.username} fell to ${n.balance} quota ($${(Number(n.balance) / 500_000).toFixed(2)}), ` +
      `below your warning threshold of ${n.threshold} quota.\nTop up to keep your API keys working.`,
  }, NOTICE_TIMEOUT_MS);
  return 'sent';
}

/** Step 2, one pass: claims due notices, sends them, records each outcome. Returns how many were sent. */
export async function deliverLowBalanceNotices(d: NoticeDeps): Promise<number> {
  // Claiming pushes next_attempt_at forward by the retry delay: a worker dying mid-send leaves the row
  // to be tried again then, by any worker.
  const claimed = await d.sql<ClaimedNotice[]>`
    WITH due AS (
      SELECT id FROM balance_notices
      WHERE sent_at IS NULL AND failed_at IS NULL AND next_attempt_at <= now()
      ORDER BY next_attempt_at LIMIT ${NOTICE_BATCH} FOR UPDATE SKIP LOCKED)
    UPDATE balance_notices n SET attempts = n.attempts + 1,
      next_attempt_at = now() + make_interval(secs => 30 * power(2, n.attempts))
    FROM due
    WHERE n.id = due.id
    RETURNING n.id, n.user_id, n.balance, n.threshold, n.created_at, n.attempts,
      COALESCE((SELECT username FROM users WHERE id = n.user_id AND deleted_at IS NULL), '') AS username,
      COALESCE((SELECT email FROM users WHERE id = n.user_id AND deleted_at IS NULL), '') AS email,
      COALESCE((SELECT setting FROM users WHERE id = n.user_id AND deleted_at IS NULL), '') AS setting`;
  if (claimed.length === 0) return 0;
  const allowPrivate = (await loadOptions(d.sql, ['WebhookAllowPrivateNetworks'])).get('WebhookAllowPrivateNetworks') === 'true';
  const outcomes = await Promise.allSettled(claimed.map((n) => deliver(d, n, allowPrivate)));
  let sent = 0;
  for (const [i, o] of outcomes.entries()) {
    const n = claimed[i]!;
    if (o.status === 'fulfilled') {
      if (o.value === 'sent') sent++;
      await d.sql`UPDATE balance_notices SET sent_at = now(), last_error = ${o.value === 'skipped' ? 'notices turned off or no address' : ''} WHERE id = ${n.id}`;
      continue;
    }
    // The error only (an SMTP answer, an HTTP status): never the secret or the body.
    const error = String((o.reason as Error)?.message ?? o.reason).slice(0, 500);
    const final = Number(n.attempts) >= NOTICE_MAX_ATTEMPTS;
    if (final) await d.sql`UPDATE balance_notices SET last_error = ${error}, failed_at = now() WHERE id = ${n.id}`;
    else await d.sql`UPDATE balance_notices SET last_error = ${error} WHERE id = ${n.id}`;
    d.log.warn({ noticeId: Number(n.id), userId: Number(n.user_id), attempt: Number(n.attempts), final, error }, 'low-balance notice not delivered');
  }
  return sent;
}

export function startLowBalanceNotices(d: NoticeDeps, intervalMs: number): { stop(): void } {
  return startPeriodicJob('low-balance notices', intervalMs, d.log, () => deliverLowBalanceNotices(d));
}
