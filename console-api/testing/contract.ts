// The contract's resource tables (/work/shared/spec/interface.md), transcribed field by field, and a
// checker that a response has exactly these fields with these JSON types. contract.unit.test.ts
// compares the transcription with the spec's tables whenever the spec file is present.
import { expect } from 'vitest';

export type JsonType = 'integer' | 'number' | 'string' | 'boolean' | 'object' | 'array' | 'null';
export type Shape = Record<string, JsonType | JsonType[]>;

export const GROUP_ENTRY: Shape = { ratio: ['number', 'string'], desc: 'string' };

export const PAY_METHOD: Shape = { name: 'string', type: 'string', color: 'string', min_topup: 'string' };

export const TOPUP_INFO: Shape = {
  enable_online_topup: 'boolean',
  enable_cardpay_topup: 'boolean',
  enable_productpay_topup: 'boolean',
  enable_globalpay_topup: 'boolean',
  enable_globalpay_pancake_topup: 'boolean',
  enable_redemption: 'boolean',
  payment_compliance_confirmed: 'boolean',
  payment_compliance_terms_version: 'number',
  pay_methods: 'array',
  globalpay_pay_methods: ['array', 'null'],
  productpay_products: ['array', 'null'],
  min_topup: 'integer',
  cardpay_min_topup: 'integer',
  globalpay_min_topup: 'integer',
  globalpay_pancake_min_topup: 'integer',
  amount_options: 'array',
  discount: 'object',
  topup_link: 'string',
};

export const LOG_ENTRY: Shape = {
  id: 'integer', user_id: 'integer', created_at: 'integer', type: 'integer', content: 'string', username: 'string',
  token_name: 'string', model_name: 'string', quota: 'integer', prompt_tokens: 'integer', completion_tokens: 'integer',
  use_time: 'integer', is_stream: 'boolean', channel: 'integer', token_id: 'integer', group: 'string',
  request_id: 'string', upstream_request_id: 'string',
};

/**
 * A log entry as this gateway serves it: the contract's fields plus the documented additions (the
 * OpenAPI document and console-api/README.md list them). The contract's own fields keep their names
 * and types; an addition is never renamed or dropped from this list without a README change.
 */
export const SERVED_LOG_ENTRY: Shape = { ...LOG_ENTRY, protocol: 'string' };

export const USAGE_STAT: Shape = { quota: 'integer', rpm: 'integer', tpm: 'integer' };

export const ACCOUNT: Shape = {
  id: 'integer', username: 'string', display_name: 'string', role: 'integer', status: 'integer', email: 'string',
  code_host_id: 'string', chat_platform_id: 'string', oidc_id: 'string', social_app_id: 'string', messenger_id: 'string',
  forum_id: 'string', group: 'string', quota: 'integer', used_quota: 'integer', request_count: 'integer',
  aff_code: 'string', aff_count: 'integer', aff_quota: 'integer', aff_history_quota: 'integer', inviter_id: 'integer',
  setting: 'string', card_provider_customer: 'string', sidebar_modules: 'string', permissions: 'object',
};

export const TOPUP_ORDER: Shape = {
  id: 'integer', user_id: 'integer', amount: 'integer', money: 'number', trade_no: 'string', payment_method: 'string',
  payment_provider: 'string', status: 'string', create_time: 'integer', complete_time: 'integer',
};

export const ORDER_PAGE: Shape = { items: 'array', total: 'integer', page: 'integer', page_size: 'integer' };
export const LOG_PAGE: Shape = { items: 'array', page: 'integer', page_size: 'integer', total: 'integer' };

export function jsonTypeOf(v: unknown): JsonType {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v as JsonType;
}

function matches(v: unknown, t: JsonType): boolean {
  const actual = jsonTypeOf(v);
  return actual === t || (t === 'number' && actual === 'integer');
}

/** Problems of `value` against `shape`: missing, extra and mistyped fields. */
export function shapeProblems(value: unknown, shape: Shape, where = 'data'): string[] {
  if (jsonTypeOf(value) !== 'object') return [`${where}: expected an object, got ${jsonTypeOf(value)}`];
  const obj = value as Record<string, unknown>;
  const problems: string[] = [];
  for (const [field, type] of Object.entries(shape)) {
    if (!(field in obj)) {
      problems.push(`${where}.${field}: missing`);
      continue;
    }
    const types = [type].flat();
    if (!types.some((t) => matches(obj[field], t))) problems.push(`${where}.${field}: expected ${types.join(' or ')}, got ${jsonTypeOf(obj[field])}`);
  }
  for (const field of Object.keys(obj)) if (!(field in shape)) problems.push(`${where}.${field}: not in the contract`);
  return problems;
}

export function expectShape(value: unknown, shape: Shape, where = 'data'): void {
  expect(shapeProblems(value, shape, where)).toEqual([]);
}

/** `{success: true, message: ''}` plus `data` when given a shape. */
export function expectEnvelope(body: unknown, withData: boolean): void {
  const keys = withData ? ['data', 'message', 'success'] : ['message', 'success'];
  expect(Object.keys(body as object).sort()).toEqual(keys);
  expect(body).toMatchObject({ success: true, message: '' });
}
