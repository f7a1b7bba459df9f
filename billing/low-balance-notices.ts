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
//      NOTICE_BATCH at a time, each within a total deadline (a webhook: NOTICE_TIMEOUT_MS for the whole
//      exchange, headers and body; an e-mail: MAIL_DEADLINE_MS), records each outcome as soon as it is
//      known, and retries a failure with a growing delay, at most NOTICE_MAX_ATTEMPTS times (then the
//      row is marked failed, with its last error).
// At most one notice per account per NOTICE_MIN_INTERVAL_SEC (an hour): a crossing within an hour of the
// account's last queued notice queues nothing (it is dropped, not sent later), so an account cannot turn
// its threshold and a 1-quota request into a stream of signed POSTs at a URL of its choosing.
// A webhook follows the outbound-address rule (core/net/outbound-guard.ts) under its own root option,
// WebhookAllowPrivateNetworks (every account sets its URL, so the channels' option must not open it),
// and is signed: X-Webhook-Timestamp (Unix seconds) and
// X-Webhook-Signature: sha256=<hex HMAC-SHA256 of "<timestamp>.<body>" with the account's secret>.
// That secret and SMTPToken are stored sealed under KEY_SECRET and opened here, just before use.
import { beforeDeadline } from '../core/net/before-deadline.js';
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
/** A webhook's whole exchange (address check, connection, headers, body) and each phase of an e-mail. */
export const NOTICE_TIMEOUT_MS = 5_000;
/** An e-mail notice's whole exchange with the SMTP server (its phases have NOTICE_TIMEOUT_MS each). */
export const MAIL_DEADLINE_MS = 3 * NOTICE_TIMEOUT_MS;
/** How much of a receiver's answer is read (and thrown away) before its connection is dropped. */
export const WEBHOOK_ANSWER_LIMIT_BYTES = 16 * 1024;
/** At most one notice per account in this many seconds (new-api: a balance reminder at most every 6 h). */
export const NOTICE_MIN_INTERVAL_SEC = 3_600;
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
  // The per-account limit: nothing for an account with a notice queued in the last hour (sent, failed,
  // skipped or still pending alike). The settlement's UPDATE holds the account's row lock until commit,
  // so two settlements of one account see each other's notice.
  const queued = await tx`
    INSERT INTO balance_notices (user_id, balance, threshold, created_at)
    SELECT c.user_id, c.balance, c.threshold, c.created_at
    FROM unnest(${crossed.map((c) => c.userId)}::bigint[], ${crossed.map((c) => c.balance)}::bigint[],
                ${crossed.map((c) => c.threshold)}::bigint[], ${crossed.map(() => nowSec)}::bigint[])
         AS c(user_id, balance, threshold, created_at)
    WHERE NOT EXISTS (SELECT 1 FROM balance_notices p
                      WHERE p.user_id = c.user_id AND p.created_at > ${nowSec - NOTICE_MIN_INTERVAL_SEC})`;
  return queued.count;
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

/** The deadline's own error (an abort's reason may be anything), named so the row's last_error says what happened. */
function deadlineError(ms: number, what: string): Error {
  return new Error(`${what} timeout: no complete answer within ${ms} ms`);
}

async function sendWebhook(url: string, secret: string, body: string, allowPrivate: boolean): Promise<void> {
  // One deadline for the whole exchange. undici's headersTimeout and bodyTimeout are idle timeouts
  // (a receiver sending one byte every few seconds would never meet them); this signal ends the lookup,
  // the connection, the wait for headers and the reading of the body alike.
  const signal = AbortSignal.timeout(NOTICE_TIMEOUT_MS);
  const agent = allowPrivate ? undefined : guardedAgent();
  try {
    // Literals are checked here; names by the connection's own lookup (DNS rebinding included).
    if (!allowPrivate) await beforeDeadline(checkTarget(url), signal);
    const timestamp = String(Math.floor(Date.now() / 1000));
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
      signal,
      ...(agent ? { dispatcher: agent } : {}),
    });
    // The status is the answer. The body is only discarded: at most WEBHOOK_ANSWER_LIMIT_BYTES of it,
    // within what is left of the deadline; a longer or slower one is cut off, which changes nothing.
    await res.body.dump({ limit: WEBHOOK_ANSWER_LIMIT_BYTES, signal }).catch(() => undefined);
    if (res.statusCode < 200 || res.statusCode >= 300) throw new Error(`webhook answered HTTP ${res.statusCode}`);
  } catch (err) {
    if (signal.aborted) throw deadlineError(NOTICE_TIMEOUT_MS, 'webhook');
    throw err;
  } finally {
    // destroy, not close: close would wait for a request still in flight.
    await agent?.destroy();
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
  // nodemailer's timeouts are per phase; the pass waits no longer than MAIL_DEADLINE_MS in all.
  const signal = AbortSignal.timeout(MAIL_DEADLINE_MS);
  try {
    await beforeDeadline(sendMail(smtp, {
      to: n.email,
      subject: 'Your balance is low',
      text: `The balance of ${n.username} fell to ${n.balance} quota ($${(Number(n.balance) / 500_000).toFixed(2)}), ` +
        `below your warning threshold of ${n.threshold} quota.\nTop up to keep your API keys working.`,
    }, NOTICE_TIMEOUT_MS), signal);
  } catch (err) {
    if (signal.aborted) throw deadlineError(MAIL_DEADLINE_MS, 'e-mail');
    throw err;
  }
  return 'sent';
}

/** Records one notice's outcome; answers whether it was sent. */
async function record(d: NoticeDeps, n: ClaimedNotice, o: PromiseSettledResult<'sent' | 'skipped'>): Promise<boolean> {
  if (o.status === 'fulfilled') {
    await d.sql`UPDATE balance_notices SET sent_at = now(), last_error = ${o.value === 'skipped' ? 'notices turned off or no address' : ''} WHERE id = ${n.id}`;
    return o.value === 'sent';
  }
  // The error only (an SMTP answer, an HTTP status): never the secret or the body.
  const error = String((o.reason as Error)?.message ?? o.reason).slice(0, 500);
  const final = Number(n.attempts) >= NOTICE_MAX_ATTEMPTS;
  if (final) await d.sql`UPDATE balance_notices SET last_error = ${error}, failed_at = now() WHERE id = ${n.id}`;
  else await d.sql`UPDATE balance_notices SET last_error = ${error} WHERE id = ${n.id}`;
  d.log.warn({ noticeId: Number(n.id), userId: Number(n.user_id), attempt: Number(n.attempts), final, error }, 'low-balance notice not delivered');
  return false;
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
  // Each notice's outcome is recorded as soon as it is known, not after the slowest of the batch: a
  // notice already sent is never left unmarked for another worker to claim and send again.
  const recorded = await Promise.allSettled(claimed.map(async (n) => {
    const [o] = await Promise.allSettled([deliver(d, n, allowPrivate)]);
    return record(d, n, o!);
  }));
  let sent = 0;
  for (const r of recorded) {
    if (r.status === 'fulfilled') {
      if (r.value) sent++;
    } else {
      // Recording failed (Postgres): the row is claimed again at its retry time.
      d.log.error({ err: r.reason }, 'low-balance notice outcome not recorded');
    }
  }
  return sent;
}

export function startLowBalanceNotices(d: NoticeDeps, intervalMs: number): { stop(): void } {
  return startPeriodicJob('low-balance notices', intervalMs, d.log, () => deliverLowBalanceNotices(d));
}
