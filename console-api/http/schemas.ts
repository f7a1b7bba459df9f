// Zod schemas of what the console answers in `data`, for the OpenAPI document. The contract's
// resources (Account, Group entry, Top-up configuration, Log entry, Usage statistics, Top-up order)
// follow /work/shared/spec/interface.md field for field.
import { z } from 'zod';

const int = z.number().int();

export const pageOf = <T extends z.ZodType>(item: T) =>
  z.object({ items: z.array(item), total: int, page: int, page_size: int });

export const permissionsSchema = z.record(z.string(), z.boolean());

export const accountSchema = z.object({
  id: int, username: z.string(), display_name: z.string(), role: int, status: int, email: z.string(),
  code_host_id: z.string(), chat_platform_id: z.string(), oidc_id: z.string(), social_app_id: z.string(),
  messenger_id: z.string(), forum_id: z.string(), group: z.string(), quota: int, used_quota: int,
  request_count: int, aff_code: z.string(), aff_count: int, aff_quota: int, aff_history_quota: int,
  inviter_id: int, setting: z.string(), card_provider_customer: z.string(), sidebar_modules: z.string(),
  permissions: permissionsSchema,
});

export const loginDataSchema = z.object({
  id: int, username: z.string(), display_name: z.string(), role: int, status: int, group: z.string(), token: z.string(),
});

export const groupsSchema = z.record(z.string(), z.object({ ratio: z.union([z.number(), z.string()]), desc: z.string() }));

export const topupInfoSchema = z.object({
  enable_online_topup: z.boolean(),
  enable_cardpay_topup: z.boolean(),
  enable_productpay_topup: z.boolean(),
  enable_globalpay_topup: z.boolean(),
  enable_globalpay_pancake_topup: z.boolean(),
  enable_redemption: z.boolean(),
  payment_compliance_confirmed: z.boolean(),
  payment_compliance_terms_version: z.number(),
  pay_methods: z.array(z.object({ name: z.string(), type: z.string(), color: z.string(), min_topup: z.string() })),
  globalpay_pay_methods: z.array(z.unknown()).nullable(),
  productpay_products: z.array(z.unknown()).nullable(),
  min_topup: int,
  cardpay_min_topup: int,
  globalpay_min_topup: int,
  globalpay_pancake_min_topup: int,
  amount_options: z.array(z.number()),
  discount: z.record(z.string(), z.number()),
  topup_link: z.string(),
});

export const logEntrySchema = z.object({
  id: int, user_id: int, created_at: int, type: int, content: z.string(), username: z.string(),
  token_name: z.string(), model_name: z.string(), quota: int, prompt_tokens: int, completion_tokens: int,
  use_time: int, is_stream: z.boolean(), channel: int, token_id: int, group: z.string(), request_id: z.string(),
  upstream_request_id: z.string(),
  // Additive to the contract's log entry (ClickHouse migration 005): rows older than it read 'anthropic'.
  protocol: z.enum(['anthropic', 'openai', '']).describe('the API the request came in by: anthropic (POST /v1/messages) or openai (POST /v1/chat/completions); empty for a row that is no request (top-up, management, system: types 1, 3, 4)'),
});

export const statSchema = z.object({ quota: int, rpm: int, tpm: int });

export const topupOrderSchema = z.object({
  id: int, user_id: int, amount: int, money: z.number(), trade_no: z.string(), payment_method: z.string(),
  payment_provider: z.string(), status: z.string(), create_time: int, complete_time: int,
});

export const tokenItemSchema = z.object({
  id: int, user_id: int, name: z.string(), key: z.string(), status: int, created_time: int, accessed_time: int,
  expired_time: int, remain_quota: int, unlimited_quota: z.boolean(), used_quota: int,
  model_limits_enabled: z.boolean(), model_limits: z.string(), allow_ips: z.string().nullable(), group: z.string(),
  cross_group_retry: z.boolean(), rate_limit_rpm: int, rate_limit_tpm: int,
});

export const channelSchema = z.object({
  id: int, type: int, name: z.string(), base_url: z.string(), status: int, models: z.string(), group: z.string(),
  priority: int, weight: int, model_mapping: z.string(), created_time: int, used_quota: int, response_time: int,
  test_time: int,
  // Channel health: why and when the status last changed, the last probe, the next one (status 3 only),
  // and the automatic-disabling overrides (null: the fleet's setting).
  status_reason: z.string(), status_time: int, probe_time: int, probe_result: z.string(), probe_failures: int,
  next_probe_time: int, auto_ban: z.boolean(), fault_threshold: int.nullable(), fault_rate_threshold: z.number().nullable(),
  // The price of an answer served at the `flex` service tier, as a fraction of the standard price.
  flex_ratio: z.number(),
});

export const redemptionSchema = z.object({
  id: int, user_id: int, name: z.string(), key: z.string(), status: int, quota: int, created_time: int,
  redeemed_time: int, used_user_id: int, expired_time: int,
});

export const optionItemSchema = z.object({
  key: z.string(), value: z.string(), secret: z.boolean(), configured: z.boolean(), write_role: int, description: z.string(),
});

export const epayPayDataSchema = z.object({
  url: z.string(),
  params: z.object({
    pid: z.string(), type: z.string(), out_trade_no: z.string(), notify_url: z.string(), return_url: z.string(),
    name: z.string(), money: z.string(), sign: z.string(), sign_type: z.literal('MD5'),
  }),
});
