// The notification preferences an account keeps in users.setting (a JSON string; new-api's field
// names): which channel carries a low-balance notice and below which balance it is sent. The console
// validates and writes them (PUT /api/user/setting); the billing worker reads them where a settlement
// lands (billing/low-balance-notices.ts) and must never fail on a value it cannot read.
import { z } from 'zod';
import { createScopedTextSealer, type ScopedTextSealer } from '../../infra/secrets/api-key-crypto.js';

export const NOTIFY_TYPES = ['email', 'webhook'] as const;
export type NotifyType = (typeof NOTIFY_TYPES)[number];

export const noticeSettingSchema = z.object({
  notify_type: z.enum(NOTIFY_TYPES).optional(),
  /** Quota units: a settlement taking the balance from at or above it to below it sends one notice. 0: off. */
  quota_warning_threshold: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
  webhook_url: z.string().optional(),
  /**
   * Key of the HMAC-SHA256 signature of each webhook body; never shown back (account-view.ts). Stored
   * sealed (createWebhookSecretSealer); a value stored before sealing is plaintext.
   */
  webhook_secret: z.string().optional(),
  notification_email: z.string().optional(),
}).passthrough();

export type NoticeSetting = z.infer<typeof noticeSettingSchema>;

/** The setting text as an object, {} when empty or unreadable. */
export function parseNoticeSetting(text: string | null | undefined): NoticeSetting {
  if (!text) return {};
  try {
    const r = noticeSettingSchema.safeParse(JSON.parse(text));
    return r.success ? r.data : {};
  } catch {
    return {};
  }
}

/** The threshold a settlement is compared with, or undefined when no notice is wanted. */
export function warningThreshold(s: NoticeSetting): number | undefined {
  if (s.notify_type === undefined || !s.quota_warning_threshold) return undefined;
  return s.quota_warning_threshold;
}

/**
 * The setting as shown to a reader: the webhook secret blanked (webhook_secret_set says whether one is
 * kept); to anyone but its owner (`owner` false: an administrator) the webhook URL without its path
 * and query too, which is where Discord, Slack and Teams put the webhook's token: with it an
 * administrator could post into the owner's channel.
 */
export function publicSettingText(text: string, owner = false): string {
  if (!text) return text;
  try {
    const o = JSON.parse(text) as Record<string, unknown>;
    if (!o || typeof o !== 'object') return text;
    let changed = false;
    if ('webhook_secret' in o) {
      o.webhook_secret_set = typeof o.webhook_secret === 'string' && o.webhook_secret !== '';
      o.webhook_secret = '';
      changed = true;
    }
    if (!owner && typeof o.webhook_url === 'string' && o.webhook_url !== '') {
      o.webhook_url = webhookOrigin(o.webhook_url);
      changed = true;
    }
    if (changed) return JSON.stringify(o);
  } catch {
    // Not JSON: nothing we wrote; shown as stored.
  }
  return text;
}

/** A webhook URL's scheme and host, its path and query (a token) left out: `https://discord.com/…`. */
function webhookOrigin(url: string): string {
  try {
    const u = new URL(url);
    return u.pathname === '/' && u.search === '' && u.hash === '' ? `${u.origin}/` : `${u.origin}/…`;
  } catch {
    return '…';
  }
}

/** Keyed by user id. */
export type WebhookSecretSealer = ScopedTextSealer<number>;

/**
 * The accounts' webhook secrets are sealed under KEY_SECRET and bound to their account: a dump of
 * `users` must not let anyone sign notices an account's receiver believes. The console seals them
 * (PUT /api/user/setting); only the billing worker opens them, to sign.
 */
export function createWebhookSecretSealer(keySecret: string): WebhookSecretSealer {
  return createScopedTextSealer(keySecret, 'notice-webhook', (userId: number) => `user:${userId}`);
}
