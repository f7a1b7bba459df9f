// Every option the console knows (the `options` table: key → text value), new-api's names where it
// has one. Each entry says how its text is validated, its default, who may change it and whether it
// is a secret (never returned by GET /api/option/, stored sealed: core/options/option-secrets.ts).
// Every option is the super administrator's (100) to change, as new-api puts all of /api/option/
// behind RootAuth: the pricing tables, the groups and the top-up link decide what every account is
// billed and where it pays, so an administrator (10) changing them could serve itself free (a group
// priced at 0) or send every account's money to its own site.
// README.md "Options" is the documentation of this table.
import { z } from 'zod';
import type { OptionSealer } from '../../core/options/option-secrets.js';
import { loadOptions } from '../../core/options/options-source.js';
import { RATIO_OPTION_KEYS } from '../../core/pricing/ratios.js';
import { DEFAULT_WEB_SEARCH_CALL_PRICE } from '../../core/pricing/input-bound.js';
import type { Db } from '../db.js';
import { ROLE } from '../accounts/roles.js';
import { optionSealer } from './option-secrets.js';
import { MAX_DISCOUNT, MAX_TOPUP_AMOUNT, MAX_UNIT_PRICE } from '../payments/pricing.js';
import { hasUrlCredentials, reservedPropertyProblem } from '../http/validation.js';
import { accountGroups, AUTO_GROUP } from './groups.js';

/**
 * The first `__proto__` (or `constructor.prototype`) property in a JSON value, as a message. Sent as
 * an object such a key is refused by the input guard (http/validation.ts); sent as JSON text it
 * arrives here. The relay's tables drop a `__proto__` entry (core/pricing/ratios.ts parseTable): a
 * model or group of that name would be stored, shown, and never priced. A queue, not recursion: the
 * text may nest deeper than the stack.
 */
function reservedPropertyIn(value: unknown): string | undefined {
  const queue: unknown[] = [value];
  for (let i = 0; i < queue.length; i++) {
    const v = queue[i];
    if (v === null || typeof v !== 'object') continue;
    for (const [key, child] of Object.entries(v)) {
      const problem = reservedPropertyProblem(key, child);
      if (problem) return `${problem}; it cannot name a model or a group`;
      queue.push(child);
    }
  }
  return undefined;
}

const json = <S extends z.ZodType>(schema: S, what: string) =>
  z.string().transform((s, c) => {
    let parsed: unknown;
    try {
      parsed = JSON.parse(s);
    } catch {
      c.addIssue({ code: 'custom', message: `must be ${what} as JSON` });
      return z.NEVER;
    }
    const reserved = reservedPropertyIn(parsed);
    if (reserved) {
      c.addIssue({ code: 'custom', message: reserved });
      return z.NEVER;
    }
    const r = schema.safeParse(parsed);
    if (!r.success) {
      c.addIssue({ code: 'custom', message: `must be ${what} as JSON (${r.error.issues[0]?.message ?? 'invalid'})` });
      return z.NEVER;
    }
    return r.data as z.output<S>;
  });

// Each refused entry named in words ("the entry "x" is -1, below 0"), not the schema library's
// "Too small: expected number to be >=0", which named no entry.
const ratioEntries = z.record(z.string(), z.unknown()).superRefine((table, c) => {
  for (const [name, value] of Object.entries(table)) {
    // JSON reads 1e400 as Infinity: a ratio that makes every cost infinite (review admin).
    const problem = typeof value !== 'number' ? 'is not a number' : !Number.isFinite(value) ? 'is too large a number' : value < 0 ? `is ${value}, below 0` : undefined;
    if (problem) {
      c.addIssue({ code: 'custom', message: `the entry ${JSON.stringify(name)} ${problem}` });
      return;
    }
  }
}).transform((table) => table as Record<string, number>);
const ratioTable = json(ratioEntries, 'an object of name to non-negative number');

const bool = z.enum(['true', 'false'], { error: 'must be true or false' }).transform((v) => v === 'true');
const int = (min = 0, max = Number.MAX_SAFE_INTEGER) =>
  z.string().regex(/^-?\d+$/, { error: 'must be an integer' }).transform(Number)
    .pipe(z.number().int().min(min, { error: `must be at least ${min}` }).max(max, { error: `must be at most ${max}` }));
/**
 * How a bounded integer stored before its upper bound existed reads: as the bound (the strictest value
 * an input can still meet), neither as written (no input could meet it) nor as the default (a
 * minimum the operator raised would fall back to the lowest).
 */
const intUpTo = (min: number, max: number) => int(min).transform((v) => Math.min(v, max));
const decimalText = z.string().regex(/^\d+(\.\d+)?$/, { error: 'must be a non-negative number' }).transform(Number);
// Without a bound, hundreds of digits read as Infinity (which z.number() refuses as not a number).
const decimal = (max: number) => decimalText.pipe(z.number({ error: `must be at most ${max}` }).max(max, { error: `must be at most ${max}` }));
const text = (max = 2000) => z.string().max(max, { error: `must be at most ${max} characters` });
// No credentials in an address: GET /api/option/ shows every address to the administrators, and
// TopUpLink to every account (the top-up page), as a channel's base_url is refused with them.
const url = z.union([z.literal(''), z.url({ protocol: /^https?$/, error: 'must be an http(s) URL or empty' })])
  .refine((s) => !hasUrlCredentials(s), { error: 'must not carry credentials' })
  .transform((s) => s.replace(/\/+$/, ''));
// A base URL that paths are appended to (ServerAddress, PayAddress, CardpayApiAddress;
// routes/topup.ts, payments/): with a query or a fragment, `<PayAddress>/submit.php` and the notify
// URL `<ServerAddress>/api/user/epay/notify` went to the host's root, and a paid order was not
// credited automatically. Refused as a channel's base_url is (routes/channel.ts). TopUpLink is only a
// link and keeps `url`. One stored before this check reads as written (readSchema), not as the default.
const baseUrl = url.refine((s) => !/[?#]/.test(s), { error: 'must not have a query (?) or a fragment (#): paths are appended to it' });

/** A loopback host name as the URL parser writes it: where plain http stays on this machine. */
export function isLoopbackHost(host: string): boolean {
  return host === 'localhost' || host === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/** Whether `text` is an https URL, or an http one to a loopback host (isLoopbackHost); false when it is no URL. */
export function isHttpsOrLoopback(text: string): boolean {
  let u: URL;
  try {
    u = new URL(text);
  } catch {
    return false;
  }
  return u.protocol === 'https:' || (u.protocol === 'http:' && isLoopbackHost(u.hostname));
}

// The OpenID issuer: its discovery document and keys decide who signs in, so plain http (readable
// and forgeable on the way) is for a provider on this machine only, as oidc-routes.ts enforces at
// sign-on; refused when saved too, rather than accepted and failing at the first sign-on.
const issuerUrl = url.refine((s) => s === '' || isHttpsOrLoopback(s), {
  error: 'must be an https URL (http only on a loopback host: localhost, 127.0.0.0/8 or [::1])',
});

// The card provider's API: its secret goes with every call as a Bearer header, and the checkout
// URL it answers is where buyers are sent; plain http to another host let either be read or
// swapped on the way (review pay). PayAddress stays baseUrl: the browser posts signed, public
// parameters there, and epay gateways are often plain http.
const secretBearingBaseUrl = baseUrl.refine((s) => s === '' || isHttpsOrLoopback(s), {
  error: 'must be an https URL (http only on a loopback host: localhost, 127.0.0.0/8 or [::1]): the API secret is sent to it',
});

/** Longest group name: new-api's abilities.group is varchar(64); routes/channel.ts bounds a channel's groups by it. */
export const MAX_GROUP_NAME = 64;
const DEFAULT_GROUP = 'default';

/** A group name as a refusal quotes it: its first 20 characters. */
const quotedGroup = (g: string) => `"${g.slice(0, 20)}${g.length > 20 ? '…' : ''}"`;

// Its keys are the groups accounts and channels are placed in: without `default` the accounts in it
// (every new account) could no longer be edited ("unknown group").
const groupRatioTable = ratioTable.superRefine((table, c) => {
  const names = Object.keys(table);
  const bad = names.find((g) => g.length === 0 || g.length > MAX_GROUP_NAME);
  // A channel stores its groups comma-separated and trimmed (routes/channel.ts, channels/abilities.ts):
  // a group "a,b" gave its channels abilities in groups "a" and "b", never routed to its accounts, and a
  // group " x " could hold accounts but no channel (its name read back as "x", unknown).
  const comma = names.find((g) => g.includes(','));
  const padded = names.find((g) => g.trim() !== g);
  // A control character (NUL above all) or half a surrogate pair names no group anyone can type, and
  // Postgres's jsonb refuses both: the check of the groups in use below failed with 500.
  // eslint-disable-next-line no-control-regex
  const control = names.find((g) => /[\u0000-\u001f\u007f]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(g));
  if (bad !== undefined) {
    c.addIssue({ code: 'custom', message: `a group name must be 1 to ${MAX_GROUP_NAME} characters (${quotedGroup(bad)})` });
  } else if (comma !== undefined) {
    c.addIssue({ code: 'custom', message: `a group name must not contain a comma (channels list their groups comma-separated) (${quotedGroup(comma)})` });
  } else if (padded !== undefined) {
    c.addIssue({ code: 'custom', message: `a group name must not start or end with white space (${quotedGroup(padded)})` });
  } else if (control !== undefined) {
    c.addIssue({ code: 'custom', message: `a group name must not contain a control character or half a surrogate pair (${JSON.stringify(control.slice(0, 20))})` });
  } else if (!Object.hasOwn(table, DEFAULT_GROUP)) {
    c.addIssue({ code: 'custom', message: `must keep the group "${DEFAULT_GROUP}" (new accounts are placed in it)` });
  } else if (Object.hasOwn(table, AUTO_GROUP)) {
    // A key of group `auto` routes through AutoGroups (core/groups/group-policy.ts): a group of that
    // name could never be routed to as itself, and an account placed in it would route through auto.
    c.addIssue({ code: 'custom', message: `"${AUTO_GROUP}" is the automatic selection of a group (AutoGroups), not a group` });
  }
});

/** The group options that name groups of GroupRatio (core/groups/group-policy.ts reads them). */
const GROUP_NAMING_OPTIONS = ['AutoGroups', 'UserUsableGroups', 'GroupRateLimits'] as const;

/** The group names a stored AutoGroups or UserUsableGroups names ('' or unreadable: none; unset AutoGroups is ["default"], which GroupRatio keeps anyway). */
function namedGroups(raw: string | undefined): string[] {
  if (!raw) return [];
  try {
    const parsed: unknown = JSON.parse(raw);
    if (Array.isArray(parsed)) return parsed.filter((g): g is string => typeof g === 'string');
    if (parsed && typeof parsed === 'object') return Object.keys(parsed);
  } catch {
    // unreadable: the relay reads it as unset
  }
  return [];
}

/**
 * For AutoGroups and UserUsableGroups: the first name that is not a group of GroupRatio. Otherwise the
 * relay's group policy drops it silently, and an `auto` key with no group left is refused (403).
 */
async function groupNotConfigured(db: Db, names: readonly string[]): Promise<string | undefined> {
  const known = new Set(await accountGroups(db));
  const unknown = names.find((g) => !known.has(g));
  return unknown === undefined ? undefined : `group "${unknown}" is not a group of GroupRatio`;
}

// AutoGroups: the order `auto` tries (unset: ["default"]). An empty list would leave `auto` nothing to try.
const autoGroups = z.union([
  z.literal(''),
  json(z.array(z.string()), 'an array of group names')
    .refine((list) => list.length > 0, { error: `must name at least one group ('' restores the default ["${DEFAULT_GROUP}"])` }),
]);
// UserUsableGroups: group → description. `auto` is offered to every account whatever this says
// (GET /api/user/self/groups), so naming it here would mean nothing (new-api uses it to switch auto on).
const userUsableGroups = z.union([
  z.literal(''),
  json(z.record(z.string(), z.string()), 'an object of group name to description')
    .refine((table) => !Object.hasOwn(table, AUTO_GROUP), {
      error: `"${AUTO_GROUP}" is not listed here: every account is offered it (GET /api/user/self/groups); AutoGroups sets the groups it tries`,
    }),
]);

const counted = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;

/**
 * The first group (by name) that `table` leaves out while a live account or a channel is in it, with
 * how many accounts, channels and live API keys use it, so that one refusal tells the operator the
 * whole job; else the first group another group option names. API keys are counted but do not refuse
 * the drop on their own: no administrator can edit another account's key, so any account naming a
 * group in a key could otherwise keep the super administrator from ever removing it. Such a key is
 * refused by the relay (403, as a key naming a group its account may no longer use) until its owner
 * picks another group. Runs under the option lock, which the writers that place accounts and channels
 * in a group take shared (options/groups.ts lockGroupsShared).
 */
async function groupLeftOut(db: Db, table: Record<string, number>): Promise<string | undefined> {
  // The keys go as one JSON text, not an array parameter (postgres.js's array types may not be
  // fetched); bound as text and cast, since postgres.js would encode a jsonb parameter again.
  const keys = JSON.stringify(Object.keys(table));
  const [used] = await db<{ group: string }[]>`
    WITH kept AS (SELECT jsonb_array_elements_text(${keys}::text::jsonb) AS name)
    SELECT min(name) AS "group" FROM (
      SELECT "group" AS name FROM users WHERE deleted_at IS NULL
      UNION
      SELECT listed AS name FROM channels, unnest(string_to_array("group", ',')) AS listed
    ) AS in_use
    WHERE name <> '' AND name NOT IN (SELECT name FROM kept)`;
  if (used?.group != null) {
    const group = used.group;
    const [n] = await db<{ accounts: number; channels: number; keys: number }[]>`
      SELECT
        (SELECT count(*)::int FROM users WHERE deleted_at IS NULL AND "group" = ${group}) AS accounts,
        (SELECT count(*)::int FROM channels WHERE ${group} = ANY(string_to_array("group", ','))) AS channels,
        (SELECT count(*)::int FROM tokens t JOIN users u ON u.id = t.user_id
          WHERE t.deleted_at IS NULL AND u.deleted_at IS NULL AND t."group" = ${group}) AS keys`;
    return `group "${group}" is used by ${counted(n!.accounts, 'account', 'accounts')}, ${counted(n!.channels, 'channel', 'channels')} ` +
      `and ${counted(n!.keys, 'API key', 'API keys')}; move the accounts and channels to another group first`;
  }
  const named = await loadOptions(db, GROUP_NAMING_OPTIONS);
  for (const key of GROUP_NAMING_OPTIONS) {
    const left = namedGroups(named.get(key)).find((g) => !Object.hasOwn(table, g));
    if (left !== undefined) return `group "${left}" is named by ${key}; remove it there first`;
  }
  return undefined;
}

/** Longest password accepted at registration, reset and change (routes/user.ts, email/email-routes.ts). */
const MAX_PASSWORD_LENGTH = 64;

// Quick amounts and discount tiers are top-up quantities: whole units from 1 (a tier from 0) to
// MAX_TOPUP_AMOUNT, the largest order. A button or tier past it is one no order can use.
const QUICK_AMOUNTS_RULE = `an array of whole quantities from 1 to ${MAX_TOPUP_AMOUNT}`;
const amountOptions = json(z.array(z.number().int().min(1).max(MAX_TOPUP_AMOUNT)), QUICK_AMOUNTS_RULE);
const DISCOUNT_RULE = 'an object of quantity to coefficient';
const discountKey = z.string().regex(/^\d+$/).refine((k) => Number(k) <= MAX_TOPUP_AMOUNT, { error: `a quantity must be at most ${MAX_TOPUP_AMOUNT}` });
const amountDiscount = json(z.record(discountKey, z.number().positive().max(MAX_DISCOUNT)), DISCOUNT_RULE);

const payMethodFields = {
  name: z.string(),
  // Sent to the provider and signed in epay's `k=v&k=v` string, values unencoded: a `&` or `=` in it
  // could make a purchase's signature read as that of another parameter set (a paid notice).
  type: z.string().regex(/^[A-Za-z0-9_-]{1,32}$/, { error: 'must be 1-32 letters, digits, _ or -' }),
  color: z.string().optional(),
};
const MIN_TOPUP_RULE = `min_topup must be a positive integer of at most ${MAX_TOPUP_AMOUNT}, as a number or a string of digits, or ''`;

export const payMethodSchema = z.object({
  ...payMethodFields,
  /**
   * Per-method minimum, a quantity like MinTopUp ('' or absent: MinTopUp). Kept as written: the
   * contract's pay_methods[].min_topup is a string, and new-api stores a string.
   */
  min_topup: z.union([z.string(), z.number()], { error: MIN_TOPUP_RULE })
    .refine((v) => v === '' || (/^[1-9][0-9]{0,6}$/.test(String(v)) && Number(v) <= MAX_TOPUP_AMOUNT), { error: MIN_TOPUP_RULE })
    .optional(),
});
export type PayMethod = z.infer<typeof payMethodSchema>;

// How PayMethods stored before min_topup was checked reads: methodMinimum (payments/topup-settings.ts)
// ignores a minimum that is not a positive number, so such a list keeps its methods instead of
// reading as the default ones.
const storedPayMethodSchema = z.object({ ...payMethodFields, min_topup: z.union([z.number(), z.string()]).optional() });

const DEFAULT_PAY_METHODS: PayMethod[] = [
  { name: 'Alipay', type: 'alipay', color: 'rgba(var(--semi-blue-5), 1)' },
  { name: 'WeChat Pay', type: 'wxpay', color: 'rgba(var(--semi-green-5), 1)' },
];

export interface OptionDef {
  key: string;
  /** A new value's text must parse with this schema (PUT /api/option/); the output is the typed value. */
  schema: z.ZodType<unknown, string>;
  /**
   * How the stored text is read, when a value written before `schema` was tightened must still read
   * as what it says rather than as the default (a unit price: the payment routes refuse the orders it
   * cannot price, instead of charging the default price). Default: `schema`.
   */
  readSchema?: z.ZodType<unknown, string>;
  /**
   * What refuses a parsed value because of what is stored elsewhere (a GroupRatio that leaves out a
   * group in use): a message naming it, or undefined. See optionConflict.
   */
  conflict?: (db: Db, value: unknown) => Promise<string | undefined>;
  default: string;
  /** Minimum role that may change it: the super administrator for every option (new-api's RootAuth). */
  writeRole: number;
  /** Secrets are never returned by GET /api/option/ (their value reads as '') and are stored sealed. */
  secret?: boolean;
  description: string;
}

const def = (key: string, schema: z.ZodType<unknown, string>, dflt: string, description: string, extra: Partial<OptionDef> = {}): OptionDef => ({
  key, schema, default: dflt, writeRole: ROLE.root, description, ...extra,
});
const secret = { secret: true };

export const OPTION_CATALOGUE: readonly OptionDef[] = [
  // Pricing (core/pricing/ratios.ts reads these; changing them publishes {kind: 'options'}).
  def('ModelRatio', ratioTable, '{}', 'model name → model ratio (JSON); merged over the built-in defaults'),
  def('CompletionRatio', ratioTable, '{}', 'model name → completion (output) ratio (JSON); default 5'),
  def('CacheRatio', ratioTable, '{}', 'model name → cache read ratio, relative to input (JSON); default 0.1'),
  def('CreateCacheRatio', ratioTable, '{}', 'model name → 5-minute cache write ratio, relative to input (JSON); default 1.25'),
  def('CreateCacheRatio1h', ratioTable, '{}', 'model name → 1-hour cache write ratio, relative to input (JSON); default 2'),
  def('SelfUseModeEnabled', bool, 'false', 'serve models that have no ratio, at ratio 37.5 (new-api\'s self-use mode); off: a request for such a model is refused with 404'),
  def('GroupRatio', groupRatioTable, '{"default":1,"vip":1,"svip":1}', `group name (1 to ${MAX_GROUP_NAME} characters) → price ratio (JSON); its keys are the account groups: "default" and every group an account or a channel is in must stay`, {
    conflict: (db, value) => groupLeftOut(db, value as Record<string, number>),
  }),
  def('LongContextRatio', json(z.record(z.string(), z.union([z.null(), z.object({
    above_tokens: z.number().int().positive(), input: z.number().min(1), output: z.number().min(1),
  })])), 'an object of model name to {above_tokens, input, output} or null'), '{}', 'model name → long-context tier (JSON): a prompt (input and cache tokens) over above_tokens has its input-side prices times input and its output price times output; null removes a default tier. Defaults: the claude-sonnet-4 models, {"above_tokens":200000,"input":2,"output":1.5} (Anthropic\'s 1M context window pricing)'),
  // Reservation bounds (core/pricing/input-bound.ts): what a request reserves when its bytes do not bound its input.
  def('ModelContextWindow', json(z.record(z.string(), z.number().int().positive()), 'an object of model name to positive integer'), '{}', 'model name → context window in tokens (JSON), merged over the built-in windows (gpt-4o 128000, gpt-4.1 1047576, o1/o3/o4-mini 200000, gpt-5 400000, Claude before 4.6 200000, 4.6 and later 1000000); a request with the context-1m beta header reserves at least 1000000. Documents, server tools, unknown blocks and images of a model without an image bound (ModelImageTokens) reserve this window (200000 for a model without one); text is reserved by its bytes, under this window when the model has one'),
  def('ModelImageTokens', json(z.record(z.string(), z.number().int().positive()), 'an object of model name to positive integer'), '{}', 'model name → the most one image costs in input tokens (JSON), merged over the built-in bounds of the Claude models (1760 up to Opus and Sonnet 4.6 and Haiku 4.5, 5500 for claude-opus-4-7, 93868 for a later Claude model: the largest image the API takes, 8000 × 8000 px); a request whose images all go to models with a bound reserves that per image instead of the model\'s window'),
  def('ModelMaxOutputTokens', json(z.record(z.string(), z.number().int().positive()), 'an object of model name to positive integer'), '{}', 'model name → output tokens (JSON): the bound a /v1/chat/completions request that sets no max_tokens / max_completion_tokens is reserved for and sent with; default 4096'),
  def('WebSearchCallPrice', decimal(Number.MAX_SAFE_INTEGER), String(DEFAULT_WEB_SEARCH_CALL_PRICE), 'quota per web search, times the group ratio: billed for each search the provider reports (usage.server_tool_use.web_search_requests) and reserved for each web_search tool\'s max_uses, 20 when unset; default $10 per 1000 searches'),
  // Group policy (core/groups/group-policy.ts reads these; '' = not set).
  def('UserUsableGroups', userUsableGroups, '', 'groups an account may pick for a key besides its own (name → description), each a group of GroupRatio ("auto" is always offered, not listed here); unset: default and vip where GroupRatio has them (new-api\'s default), so a group added to GroupRatio is open only to the accounts placed in it until listed here', {
    conflict: (db, value) => groupNotConfigured(db, value === '' ? [] : Object.keys(value as Record<string, string>)),
  }),
  def('AutoGroups', autoGroups, '', 'the order in which the `auto` group tries groups, each a group of GroupRatio, at least one; unset: ["default"]', {
    conflict: (db, value) => groupNotConfigured(db, value === '' ? [] : (value as string[])),
  }),
  // A limit for a group GroupRatio lacks would limit nobody (a typo, "VIP" for "vip"): refused like AutoGroups'.
  def('GroupRateLimits', z.union([z.literal(''), json(z.record(z.string(), z.object({ rpm: z.number().int().min(0).optional(), tpm: z.number().int().min(0).optional() })), 'an object of group name to {rpm, tpm}')]), '', 'rate limits of each group, per account (all its keys of the group together), each a group of GroupRatio', {
    conflict: (db, value) => groupNotConfigured(db, value === '' ? [] : Object.keys(value as Record<string, unknown>)),
  }),
  // Top-up page (GET /api/user/topup/info). Like every option, root's: an administrator setting what
  // a unit of quota costs (Price, CardpayUnitPrice, AmountDiscount) or the referral rewards could
  // credit itself (a near-free top-up, a reward for an account of its own), which a quota edit on
  // itself is refused for; one setting TopUpLink could send every account's payment to its own site.
  def('TopUpLink', url, '', 'external top-up link (http or https; the web console makes it a link); empty means in-site top-up'),
  def('RedemptionEnabled', bool, 'true', 'redemption codes may be used (POST /api/user/topup)'),
  // Minimums of a quantity: at most MAX_TOPUP_AMOUNT, the largest quantity of an order (above it no
  // order could be made). One stored above it before this bound reads as MAX_TOPUP_AMOUNT.
  def('MinTopUp', int(1, MAX_TOPUP_AMOUNT), '1', `minimum quantity of a QR-code (epay) payment, 1 to ${MAX_TOPUP_AMOUNT}`, { readSchema: intUpTo(1, MAX_TOPUP_AMOUNT) }),
  def('CardpayMinTopUp', int(1, MAX_TOPUP_AMOUNT), '1', `minimum quantity of a card payment, 1 to ${MAX_TOPUP_AMOUNT}`, { readSchema: intUpTo(1, MAX_TOPUP_AMOUNT) }),
  def('GlobalpayMinTopUp', int(1, MAX_TOPUP_AMOUNT), '1', `minimum of the global payment provider (not integrated), 1 to ${MAX_TOPUP_AMOUNT}`, { readSchema: intUpTo(1, MAX_TOPUP_AMOUNT) }),
  def('GlobalpayPancakeMinTopUp', int(1, MAX_TOPUP_AMOUNT), '1', `minimum of the second global provider (not integrated), 1 to ${MAX_TOPUP_AMOUNT}`, { readSchema: intUpTo(1, MAX_TOPUP_AMOUNT) }),
  def('PayMethods', json(z.array(payMethodSchema), 'an array of {name, type, color, min_topup?}'), JSON.stringify(DEFAULT_PAY_METHODS), 'QR-code payment methods shown when payments are enabled; min_topup: a positive integer (number or string), the method\'s own minimum quantity', { readSchema: json(z.array(storedPayMethodSchema), 'an array of {name, type, color, min_topup?}') }),
  def('AmountOptions', amountOptions, '[10,20,50,100,200,500]', `quick-amount buttons of the top-up page: whole quantities from 1 to ${MAX_TOPUP_AMOUNT}`, {
    readSchema: json(z.array(z.number().positive()), 'an array of positive numbers'),
  }),
  def('AmountDiscount', amountDiscount, '{}', `discount tiers: the coefficient of the largest key <= quantity multiplies the price; keys are quantities of at most ${MAX_TOPUP_AMOUNT}`, {
    readSchema: json(z.record(z.string().regex(/^\d+$/), z.number().positive().max(MAX_DISCOUNT)), DISCOUNT_RULE),
  }),
  def('Price', decimal(MAX_UNIT_PRICE), '7.3', `QR-code payment: money per unit of quantity (1 unit = 1 US dollar of quota = 500000 quota), at most ${MAX_UNIT_PRICE}`, { readSchema: decimalText }),
  def('CardpayUnitPrice', decimal(MAX_UNIT_PRICE), '1', `card payment: money per unit of quantity, at most ${MAX_UNIT_PRICE}`, { readSchema: decimalText }),
  // Payment credentials and switches.
  def('ServerAddress', baseUrl, 'http://127.0.0.1:3001', 'public base URL of this console API; notify and return URLs are built from it (no query or fragment)', { readSchema: url }),
  def('PaymentComplianceConfirmed', bool, 'false', 'the payment compliance terms are confirmed; until then pay_methods is empty and payments are refused'),
  def('PaymentComplianceTermsVersion', int(0), '1', 'version of the compliance terms'),
  def('PayAddress', baseUrl, '', 'epay gateway base URL (the payment form is posted to <PayAddress>/submit.php; no query or fragment)', { readSchema: url }),
  def('EpayId', text(100), '', 'epay merchant id (pid)'),
  def('EpayKey', text(200), '', 'epay merchant key (MD5 signing secret)', secret),
  def('CardpayApiAddress', secretBearingBaseUrl, '', 'card provider API base URL (checkout sessions are created at <address>/v1/checkout/sessions; no query or fragment)', { readSchema: url }),
  def('CardpayApiSecret', text(200), '', 'card provider API secret key', secret),
  def('CardpayWebhookSecret', text(200), '', 'card provider webhook signing secret', secret),
  // Channels: a base_url on a private, loopback or link-local network (a local mock provider, an
  // in-house proxy) is refused unless this is set; root only, as an administrator's channel test
  // could otherwise reach the gateway's own databases (routes/channel.ts, core/net/outbound-guard.ts).
  def('ChannelAllowPrivateNetworks', bool, 'false', 'channel base_url may point at private, loopback and link-local addresses (e.g. a provider mock on 127.0.0.1)'),
  // Low-balance notice webhooks: every account sets its own webhook_url, so a private target lets any
  // account make the billing worker POST into the gateway's network (ClickHouse's HTTP port, cloud
  // metadata). An option of its own: turning on private channels for a local provider must not open that.
  def('WebhookAllowPrivateNetworks', bool, 'false', 'an account\'s low-balance notice webhook_url may point at private, loopback and link-local addresses (any account sets its own: only for a trusted, closed deployment)'),
  // Registration (routes/user.ts) and referrals (referrals/referrals.ts); new-api's names where it has them.
  def('RegisterEnabled', bool, 'true', 'new accounts may be created (password registration and first sign-on alike)'),
  def('PasswordRegisterEnabled', bool, 'true', 'POST /api/user/register is open (sign-on may still create accounts when RegisterEnabled)'),
  def('EmailVerificationEnabled', bool, 'false', 'registration needs an e-mail address and the code sent to it (GET /api/verification)'),
  // At most the longest password accepted: above it no password could be set. One stored above it
  // before this bound reads as MAX_PASSWORD_LENGTH.
  def('PasswordMinLength', int(8, MAX_PASSWORD_LENGTH), '8', `minimum password length at registration, reset and change (8 to ${MAX_PASSWORD_LENGTH}; ${MAX_PASSWORD_LENGTH} is always the maximum)`, { readSchema: intUpTo(8, MAX_PASSWORD_LENGTH) }),
  def('PasswordRequireLetterAndDigit', bool, 'false', 'a password must contain at least one letter and one digit'),
  def('QuotaForNewUser', int(0), '0', 'quota added to the balance of each account created by registration or sign-on (new-api\'s welcome credit; a top-up log row); not to accounts an administrator creates'),
  def('QuotaForInviter', int(0), '0', 'referral reward (quota) added to the inviter\'s aff_quota for each account registered with its aff_code'),
  def('QuotaForInvitee', int(0), '0', 'quota added to the balance of an account registered with an aff_code'),
  def('AffTransferMinQuota', int(1), '500000', 'smallest referral quota POST /api/user/aff_transfer moves to the balance (default 500000 = $1, new-api\'s QuotaPerUnit)'),
  // E-mail (email/): SMTP credentials.
  def('SMTPServer', text(255), '', 'SMTP host for verification codes, password resets and low-balance notices; empty: e-mail is off'),
  def('SMTPPort', int(1, 65_535), '587', 'SMTP port (465 implies TLS from the start)'),
  def('SMTPSSLEnabled', bool, 'false', 'TLS from the first byte (SMTPS) instead of STARTTLS'),
  def('SMTPAccount', text(255), '', 'SMTP user name; empty: no authentication'),
  def('SMTPFrom', text(255), '', 'From address of the e-mails; default SMTPAccount'),
  def('SMTPToken', text(500), '', 'SMTP password', secret),
  // Single sign-on (oidc/): OpenID Connect. new-api's names.
  def('oidc.enabled', bool, 'false', 'OpenID Connect sign-on (GET /api/oauth/oidc/start, GET /api/oauth/oidc)'),
  // One stored before the save check reads as written: the sign-on then refuses it naming the rule.
  def('oidc.well_known', issuerUrl, '', 'issuer URL (https; http only on a loopback host); its /.well-known/openid-configuration is discovered', { readSchema: url }),
  def('oidc.client_id', text(500), '', 'client id registered at the provider'),
  def('oidc.client_secret', text(500), '', 'client secret registered at the provider', secret),
  def('oidc.allowed_email_domains', text(2000), '', 'comma-separated e-mail domains allowed to sign on (the provider must assert email_verified); empty: any'),
  def('CardpayCurrency', z.string().regex(/^[a-z]{3}$/, { error: 'must be a three-letter lower-case currency code' }), 'usd', 'currency of card payments'),
];

export const OPTION_KEYS = new Set(OPTION_CATALOGUE.map((o) => o.key));
const BY_KEY = new Map(OPTION_CATALOGUE.map((o) => [o.key, o]));

export function optionDef(key: string): OptionDef | undefined {
  return BY_KEY.get(key);
}

/**
 * For PUT /api/option/, after the value parsed with `d.schema`: why it cannot be stored given the
 * accounts and channels (a message to answer as 400, prefixed "value (<key>): "), or undefined.
 */
export async function optionConflict(db: Db, d: OptionDef, value: unknown): Promise<string | undefined> {
  return d.conflict ? d.conflict(db, value) : undefined;
}

export function isRatioOption(key: string): boolean {
  return (RATIO_OPTION_KEYS as readonly string[]).includes(key);
}

/** The text stored for an option: a secret's sealed (an empty one stays empty: nothing to hide, and it reads as not set). */
export function storedOptionText(d: OptionDef, text: string, sealer: OptionSealer = optionSealer()): string {
  return d.secret && text !== '' ? sealer.seal(d.key, text) : text;
}

/**
 * Typed view of the options table, defaults applied, secrets opened. A stored value that no longer
 * parses reads as the default; a secret that does not open (sealed under another KEY_SECRET) throws,
 * when it is read and not before, so that it takes down only what needs it.
 */
export interface Options {
  raw(key: string): string;
  get<T>(key: string): T;
  /** Whether the option has a non-empty value, without opening a secret. */
  configured(key: string): boolean;
}

export async function loadOptionView(db: Db): Promise<Options> {
  const stored = await loadOptions(db);
  const raw = (key: string): string => {
    const value = stored.get(key);
    if (value === undefined) return BY_KEY.get(key)?.default ?? '';
    return BY_KEY.get(key)?.secret ? optionSealer().open(key, value) : value;
  };
  return {
    raw,
    configured: (key) => (stored.get(key) ?? BY_KEY.get(key)?.default ?? '') !== '',
    get<T>(key: string): T {
      const d = BY_KEY.get(key);
      if (!d) throw new Error(`unknown option ${key}`);
      const r = (d.readSchema ?? d.schema).safeParse(raw(key));
      return (r.success ? r.data : d.schema.parse(d.default)) as T;
    },
  };
}
