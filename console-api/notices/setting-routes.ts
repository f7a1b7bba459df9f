// PUT /api/user/setting (new-api's): the account's notification preferences, kept in users.setting
// (core/notices/notice-setting.ts). A low-balance notice goes by e-mail to the account's bound address
// or to a webhook, whose URL follows the outbound-address rule (core/net/outbound-guard.ts) under the
// root option WebhookAllowPrivateNetworks (not the channels' one) and whose body is signed with the account's secret,
// stored sealed (createWebhookSecretSealer): only the billing worker opens it.
import { z } from 'zod';
import { checkTarget, PrivateTargetError } from '../../core/net/outbound-guard.js';
import { NOTIFY_TYPES, parseNoticeSetting } from '../../core/notices/notice-setting.js';
import { isSealedText } from '../../infra/secrets/api-key-crypto.js';
import { ROLE } from '../accounts/roles.js';
import type { ConsoleContext } from '../context.js';
import type { Api } from '../http/api.js';
import { ok } from '../http/envelope.js';
import { ConsoleError } from '../http/errors.js';
import { safeInt } from '../http/validation.js';
import { loadOptionView } from '../options/option-catalogue.js';

export const WEBHOOK_SECRET_MIN = 16;

export const userSettingBody = z.object({
  notify_type: z.enum(NOTIFY_TYPES, { error: `must be one of ${NOTIFY_TYPES.join(', ')}` }),
  quota_warning_threshold: safeInt.min(0, { error: 'must be at least 0' }),
  webhook_url: z.string({ error: 'must be a string' }).max(2000, { error: 'must be at most 2000 characters' }).optional(),
  webhook_secret: z.string({ error: 'must be a string' }).max(200, { error: 'must be at most 200 characters' }).optional(),
  notification_email: z.string({ error: 'must be a string' }).max(254, { error: 'must be at most 254 characters' }).optional(),
  accept_unset_model_ratio_model: z.boolean({ error: 'must be a boolean' }).optional(),
  record_ip_log: z.boolean({ error: 'must be a boolean' }).optional(),
});

function webhookUrl(raw: string | undefined): URL {
  let url: URL;
  try {
    url = new URL(raw ?? '');
  } catch {
    throw new ConsoleError('VALIDATION_FAILED', 'webhook_url: must be an http(s) URL (required when notify_type is webhook)');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new ConsoleError('VALIDATION_FAILED', 'webhook_url: must be an http(s) URL');
  if (url.username || url.password) throw new ConsoleError('VALIDATION_FAILED', 'webhook_url: must not carry credentials');
  return url;
}

export function registerSettingRoutes(api: Api, ctx: ConsoleContext): void {
  const { sql } = ctx;

  api.route({
    method: 'PUT', path: '/api/user/setting', tag: 'account', access: ROLE.user, body: userSettingBody,
    summary: 'Set the notification preferences (low-balance notice: threshold and channel)',
    description: 'notify_type email (to the bound e-mail address) or webhook (webhook_url, and webhook_secret of at least 16 characters, which signs each body: ' +
      'X-Webhook-Signature: sha256=<hex HMAC-SHA256 of "<X-Webhook-Timestamp>.<body>">). A settlement that takes the balance from at or above quota_warning_threshold ' +
      'to below it sends one notice; 0 turns notices off. An empty webhook_secret with the same webhook_url keeps the stored secret.',
    errors: ['INVALID_JSON'],
  }, async ({ body, user }) => {
    const before = parseNoticeSetting(user.setting);
    const setting: Record<string, unknown> = { ...before, notify_type: body.notify_type, quota_warning_threshold: body.quota_warning_threshold };
    if (body.accept_unset_model_ratio_model !== undefined) setting.accept_unset_model_ratio_model = body.accept_unset_model_ratio_model;
    if (body.record_ip_log !== undefined) setting.record_ip_log = body.record_ip_log;
    delete setting.webhook_secret_set;
    if (body.notify_type === 'webhook') {
      const url = webhookUrl(body.webhook_url);
      const allowPrivate = (await loadOptionView(sql)).get<boolean>('WebhookAllowPrivateNetworks');
      if (!allowPrivate) {
        try {
          await checkTarget(url.toString());
        } catch (err) {
          if (err instanceof PrivateTargetError) {
            throw new ConsoleError('VALIDATION_FAILED', `webhook_url: ${err.message}; only public addresses may receive notices (the super administrator's option WebhookAllowPrivateNetworks allows others)`);
          }
          throw err;
        }
      }
      const kept = !body.webhook_secret && before.webhook_url === url.toString() ? before.webhook_secret : undefined;
      if (kept && isSealedText(kept)) {
        // Its length was checked when it was set; the console has no need to open it.
        setting.webhook_secret = kept;
      } else {
        // A kept secret without the prefix was stored before sealing: sealed now.
        const secret = kept || body.webhook_secret || '';
        if (secret.length < WEBHOOK_SECRET_MIN) {
          throw new ConsoleError('VALIDATION_FAILED', `webhook_secret: must be at least ${WEBHOOK_SECRET_MIN} characters (it signs each notice)`);
        }
        setting.webhook_secret = ctx.webhookSecrets.seal(user.id, secret);
      }
      setting.webhook_url = url.toString();
    } else {
      if (!user.email) throw new ConsoleError('VALIDATION_FAILED', 'notify_type: e-mail notices go to the bound e-mail address; bind one first (POST /api/oauth/email/bind)');
      // Only the bound (verified) address: a notice must not become a way to mail strangers.
      if (body.notification_email && body.notification_email.toLowerCase() !== user.email.toLowerCase()) {
        throw new ConsoleError('VALIDATION_FAILED', 'notification_email: must be empty or the bound e-mail address');
      }
      setting.notification_email = user.email;
    }
    await sql`UPDATE users SET setting = ${JSON.stringify(setting)} WHERE id = ${user.id}`;
    return ok();
  });
}
