// Public endpoints about the service itself: GET /api/status (liveness and the public settings a
// console front end needs before login) and GET /api/openapi.json (the OpenAPI 3.1 document).
import { z } from 'zod';
import { QUOTA_PER_DOLLAR } from '../../core/pricing/ratios.js';
import type { ConsoleContext } from '../context.js';
import type { Api } from '../http/api.js';
import { ok } from '../http/envelope.js';
import { buildOpenApiDocument } from '../http/openapi.js';
import { loadOptionView } from '../options/option-catalogue.js';
import { oidcConfigured } from '../oidc/oidc-routes.js';
import { loadTopupSettings } from '../payments/topup-settings.js';

export function registerMetaRoutes(api: Api, ctx: ConsoleContext): void {
  api.route({
    method: 'GET', path: '/api/status', tag: 'service', access: 'public',
    data: z.object({
      version: z.string(), quota_per_unit: z.number().int(), server_address: z.string(), top_up_link: z.string(),
      enable_online_topup: z.boolean(), enable_cardpay_topup: z.boolean(), enable_redemption: z.boolean(), time: z.number().int(),
      // Beyond the contract: what the login and registration pages offer (new-api's names where it has one).
      register_enabled: z.boolean(), password_register_enabled: z.boolean(), email_verification: z.boolean(),
      email_enabled: z.boolean(), oidc_enabled: z.boolean(),
      // The least referral quota POST /api/user/aff_transfer moves (option AffTransferMinQuota): the
      // profile's form says it, rather than the refusal alone.
      aff_transfer_min_quota: z.number().int(),
    }),
    summary: 'Service status and public settings',
  }, async () => {
    const o = await loadOptionView(ctx.sql);
    const s = await loadTopupSettings(ctx.sql, o);
    return ok({
      version: '1',
      quota_per_unit: QUOTA_PER_DOLLAR,
      server_address: s.serverAddress,
      top_up_link: s.topUpLink,
      enable_online_topup: s.epayEnabled,
      enable_cardpay_topup: s.cardpayEnabled,
      enable_redemption: s.redemptionEnabled,
      time: ctx.now(),
      register_enabled: o.get<boolean>('RegisterEnabled'),
      password_register_enabled: o.get<boolean>('PasswordRegisterEnabled'),
      email_verification: o.get<boolean>('EmailVerificationEnabled'),
      // Mail is configured (SMTPServer): codes can be sent (password reset, e-mail binding).
      email_enabled: o.get<string>('SMTPServer') !== '',
      // Whether GET /api/oauth/oidc/start starts one.
      oidc_enabled: oidcConfigured(o),
      aff_transfer_min_quota: o.get<number>('AffTransferMinQuota'),
    });
  });

  let doc: Record<string, unknown> | undefined;
  api.route({
    method: 'GET', path: '/api/openapi.json', tag: 'service', access: 'public', produces: 'application/json',
    summary: 'This OpenAPI 3.1 document (not wrapped in the envelope)',
  }, async () => (doc ??= buildOpenApiDocument(api.endpoints)));
}
