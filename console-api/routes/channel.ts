// /api/channel/: administrators add upstream channels. The channel key is sealed with the API-key
// crypto (AES-256-GCM) and never returned. The abilities rows (group x model) are rebuilt in the same
// transaction (channels/abilities.ts), so routing never sees a channel without its abilities or the reverse.
import { mappedModel } from '../../core/channels/model-mapping.js';
import { beforeDeadline } from '../../core/net/before-deadline.js';
import { request as httpRequest } from 'undici';
import { z } from 'zod';
import { ROLE } from '../accounts/roles.js';
import type { ConsoleContext } from '../context.js';
import type { Db } from '../db.js';
import type { Api } from '../http/api.js';
import { ok } from '../http/envelope.js';
import { ConsoleError } from '../http/errors.js';
import { channelSchema, pageOf } from '../http/schemas.js';
import { containsPattern, hasUrlCredentials, idParams, int32, pageQuery, paging, queryString, requiredName, safeInt } from '../http/validation.js';
import { loadOptionView, MAX_GROUP_NAME } from '../options/option-catalogue.js';
import { accountGroups, lockGroupsShared } from '../options/groups.js';
import { CHANNEL_STATUS, rebuildAbilities } from '../channels/abilities.js';
import { ChannelProber } from '../channels/channel-prober.js';
import { checkTarget, guardedAgent, PRIVATE_TARGET, PrivateTargetError } from '../../core/net/outbound-guard.js';
import { oneTokenRequest } from '../../core/channels/output-limit.js';
import { providerErrorType, readHead } from '../channels/provider-answer.js';

/** new-api's channel type of the Anthropic (Claude) API. */
export const DEFAULT_CHANNEL_TYPE = 14;

/**
 * The channel types the relay speaks (relay/providers/registry.ts, core/channels/output-limit.ts):
 * new-api's 1 (OpenAI Chat Completions) and 14 (Anthropic Messages). The relay sends any other type
 * Anthropic's Messages API, so an Azure (3) or Gemini (24) channel would be accepted and then fail
 * every request: refused at the edge instead.
 */
export const SUPPORTED_CHANNEL_TYPES = { 1: 'OpenAI Chat Completions', 14: 'Anthropic Messages' } as const;
const CHANNEL_TYPE_RULE = `must be ${Object.entries(SUPPORTED_CHANNEL_TYPES).map(([t, name]) => `${t} (${name})`).join(' or ')}, the types the relay speaks`;

/**
 * new-api channel fields this console has no use for. new-api's edit form sends them empty with
 * every channel, so empty (or null, or `{}` for a mapping) is accepted and ignored; a value is
 * refused naming the field, where dropping it would report a setting that has no effect.
 */
function unsupportedChannelField(why: string) {
  return z.union([z.string(), z.null()], { error: 'must be a string or null' })
    .refine((v) => v === null || v.trim() === '' || v.trim() === '{}', { error: why })
    .optional();
}

// new-api's bounds (its abilities columns are group varchar(64), model varchar(255)), so a channel
// copied from it fits; a longer name would also outgrow the btree entry of abilities' primary key
// (about 2,700 bytes). 1,000 models is several times the largest provider catalogue. Group names
// are GroupRatio keys, bounded by MAX_GROUP_NAME where that option is set.
export const MAX_CHANNEL_MODELS = 1000;
export const MAX_CHANNEL_GROUPS = 100;
export const MAX_MODEL_NAME = 255;

function commaList(field: string, maxItems: number, maxLength: number) {
  return z
    .union([z.string({ error: `must be a comma-separated string or an array of strings` }), z.array(z.string())], {
      error: 'must be a comma-separated string or an array of strings',
    })
    // An array's items are split on commas too: the list is stored comma-joined and split again into
    // abilities (channels/abilities.ts), so an item "a, b" was two names there, one here, and 1,000
    // such items passed the count with tens of thousands of names.
    .transform((v) => [...new Set((Array.isArray(v) ? v : [v]).flatMap((s) => s.split(',')).map((s) => s.trim()).filter(Boolean))])
    .refine((list) => list.length > 0, { error: `must name at least one ${field}` })
    .refine((list) => list.length <= maxItems, { error: `must name at most ${maxItems} ${field}s`, abort: true })
    .refine((list) => list.every((s) => s.length <= maxLength), { error: `each ${field} name must be at most ${maxLength} characters` });
}

function mappingProblem(table: Record<string, string>): string | undefined {
  const entries = Object.entries(table);
  if (entries.length > MAX_CHANNEL_MODELS) return `must have at most ${MAX_CHANNEL_MODELS} entries`;
  if (entries.some(([from, to]) => from.length > MAX_MODEL_NAME || to.length > MAX_MODEL_NAME)) {
    return `each model name must be at most ${MAX_MODEL_NAME} characters`;
  }
  return undefined;
}

/** model_mapping sent as JSON text: its object, or undefined when it is not one of strings. */
function mappingText(text: string): Record<string, string> | undefined {
  try {
    const parsed: unknown = JSON.parse(text);
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed) && Object.values(parsed).every((x) => typeof x === 'string')) {
      return parsed as Record<string, string>;
    }
  } catch {
    // not JSON: refused below like any other shape
  }
  return undefined;
}

const modelMapping = z
  .union([z.string(), z.record(z.string(), z.string()), z.null()], {
    error: 'must be a JSON object of model name to model name',
  })
  .transform((v, c) => {
    if (v === null || v === '') return '';
    const table = typeof v === 'string' ? mappingText(v) : v;
    const problem = table ? mappingProblem(table) : 'must be a JSON object of model name to model name';
    if (problem) {
      c.addIssue({ code: 'custom', message: problem });
      return z.NEVER;
    }
    return JSON.stringify(table);
  });

export const createChannelBody = z.object({
  name: requiredName(100),
  type: z.union([z.literal(1), z.literal(14)], { error: CHANNEL_TYPE_RULE }).optional(),
  // Credentials in the address (https://user:pw@host) would be shown to every administrator by the
  // channel list, beside the key that is never shown: refused, as a notice's webhook_url is.
  base_url: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }).max(2048)
    .refine((u) => !hasUrlCredentials(u), { error: 'must not carry credentials' })
    // The API paths are appended to the stored text: `http://host?x=1` became `http://host?x=1/v1/messages`,
    // a request to the host's root that failed at every call (and disabled the channel).
    .refine((u) => !/[?#]/.test(u), { error: 'must not have a query (?) or a fragment (#): the API paths are appended to it' }),
  // White space only is no credential (it would be sent as an empty header): refused as an empty key.
  key: z.string({ error: 'must be a string' }).min(1, { error: 'is required' }).max(10_000, { error: 'must be at most 10,000 characters' })
    .refine((s) => s === '' || s.trim() !== '', { error: 'is required' })
    // Sent as a header value: one with a line break (a key pasted with its newline, new-api's one key a
    // line), another control character or a character outside Latin-1 cannot be, and every request to
    // the channel failed before it left the relay (review route). Blanks around it are no part of it.
    .transform((s) => s.trim())
    .refine((s) => !/[\u0000-\u001f\u007f]/.test(s), { error: 'must be one key on one line: no line break or control character (this gateway takes one key a channel)' })
    .refine((s) => !/[^\u0000-\u00ff]/.test(s), { error: 'must hold only characters a header can carry (Latin-1): a provider key is ASCII' }),
  models: commaList('model', MAX_CHANNEL_MODELS, MAX_MODEL_NAME),
  group: commaList('group', MAX_CHANNEL_GROUPS, MAX_GROUP_NAME).optional(),
  // priority is BIGINT (channels and abilities); type and weight are INT columns.
  priority: safeInt.optional(),
  weight: int32(0).optional(),
  model_mapping: modelMapping.optional(),
  status: z
    .union([z.literal(1), z.literal(2), z.literal(3)], { error: 'must be 1 (enabled), 2 or 3 (disabled)' })
    .optional(),
  // Channel health (README "Routing"): whether the relays may disable it automatically, and its own
  // thresholds instead of the fleet's (null: the fleet's setting; 0: that rule off).
  auto_ban: z.union([z.boolean(), z.literal(0), z.literal(1)], { error: 'must be true, false, 0 or 1' })
    .transform((v) => v === true || v === 1).optional(),
  fault_threshold: z.union([int32(0), z.null()], { error: 'must be an integer >= 0 or null' }).optional(),
  fault_rate_threshold: z.union([z.number().min(0).max(1), z.null()], { error: 'must be a number from 0 to 1, or null' }).optional(),
  // What the provider charges for an answer served at the `flex` service tier, as a fraction of its
  // standard price (OpenAI: 0.5); above 1 would bill more than the reservation held.
  flex_ratio: z.number({ error: 'must be a number greater than 0 and at most 1' })
    .gt(0, { error: 'must be a number greater than 0 and at most 1' }).max(1, { error: 'must be a number greater than 0 and at most 1' }).optional(),
  test_model: unsupportedChannelField('is not stored: GET /api/channel/test/:id?model=<name> tests a model (default the channel\'s first)'),
  tag: unsupportedChannelField('channel tags are not supported'),
  other: unsupportedChannelField('is not supported (new-api\'s per-type setting; types 1 and 14 need none)'),
  status_code_mapping: unsupportedChannelField('is not supported: an upstream status is classified as it is (README, "Routing")'),
});

export const updateChannelBody = createChannelBody.partial().extend({
  id: z.number({ error: 'must be an integer' }).int({ error: 'must be an integer' }).positive({ error: 'must be a positive integer' }),
});

/** The list's `status` filter: a status, or new-api's words (`disabled`: manually or automatically). */
const STATUS_FILTER: Record<string, number[]> = {
  1: [CHANNEL_STATUS.enabled], 2: [2], 3: [3], enabled: [CHANNEL_STATUS.enabled], disabled: [2, 3],
};
const STATUS_FILTER_RULE = 'must be 1 (enabled), 2, 3, enabled or disabled (2 and 3)';

export const listChannelsQuery = pageQuery.extend({
  keyword: queryString(100),
  /** A group the channel serves (one of its comma-separated groups, exactly). */
  group: queryString(MAX_GROUP_NAME),
  status: z.preprocess((v) => (v === '' || v === null ? undefined : v),
    z.enum(['1', '2', '3', 'enabled', 'disabled'], { error: STATUS_FILTER_RULE }).optional()),
});
export const testChannelQuery = z.object({ model: queryString(200) });

interface ChannelRow {
  id: number;
  type: number;
  name: string;
  base_url: string;
  status: number;
  models: string;
  group: string;
  priority: number;
  weight: number;
  model_mapping: string;
  created_time: number;
  used_quota: number;
  response_time?: number;
  test_time?: number;
  status_reason: string;
  status_time: number;
  probe_time: number;
  probe_result: string;
  probe_failures: number;
  next_probe_time: number;
  auto_ban: boolean;
  fault_threshold: number | null;
  fault_rate_threshold: number | null;
  flex_ratio: number;
}

const CHANNEL_COLUMNS = ['id', 'type', 'name', 'base_url', 'status', 'models', 'group', 'priority', 'weight',
  'model_mapping', 'created_time', 'used_quota', 'response_time', 'test_time',
  'status_reason', 'status_time', 'probe_time', 'probe_result', 'probe_failures', 'next_probe_time', 'auto_ban',
  'fault_threshold', 'fault_rate_threshold', 'flex_ratio'];

export function toChannel(r: ChannelRow) {
  return {
    id: Number(r.id), type: Number(r.type), name: r.name, base_url: r.base_url, status: Number(r.status),
    models: r.models, group: r.group, priority: Number(r.priority), weight: Number(r.weight),
    model_mapping: r.model_mapping, created_time: Number(r.created_time), used_quota: Number(r.used_quota),
    response_time: Number(r.response_time ?? 0), test_time: Number(r.test_time ?? 0),
    status_reason: r.status_reason ?? '', status_time: Number(r.status_time ?? 0),
    probe_time: Number(r.probe_time ?? 0), probe_result: r.probe_result ?? '', probe_failures: Number(r.probe_failures ?? 0),
    next_probe_time: Number(r.next_probe_time ?? 0), auto_ban: r.auto_ban ?? true,
    fault_threshold: r.fault_threshold === null || r.fault_threshold === undefined ? null : Number(r.fault_threshold),
    fault_rate_threshold: r.fault_rate_threshold === null || r.fault_rate_threshold === undefined ? null : Number(r.fault_rate_threshold),
    flex_ratio: Number(r.flex_ratio ?? 1),
  };
}

async function assertGroups(db: Db, groups: string[]): Promise<void> {
  const known = await accountGroups(db);
  const unknown = groups.find((g) => !known.includes(g));
  if (unknown !== undefined) throw new ConsoleError('UNKNOWN_GROUP', `group: unknown group "${unknown}"`);
}

/** Stored form of a base_url: without trailing slashes. */
function normaliseBaseUrl(url: string): string {
  return url.replace(/\/+$/, '');
}

async function privateNetworksAllowed(db: Db): Promise<boolean> {
  return (await loadOptionView(db)).get<boolean>('ChannelAllowPrivateNetworks');
}

const PRIVATE_HINT = 'the super administrator\'s option ChannelAllowPrivateNetworks allows such targets';

/** 400 for a base_url on a private, loopback or link-local network, unless the option allows them. */
async function assertTargetAllowed(db: Db, baseUrl: string): Promise<void> {
  if (await privateNetworksAllowed(db)) return;
  try {
    await checkTarget(baseUrl);
  } catch (err) {
    if (err instanceof PrivateTargetError) throw new ConsoleError('VALIDATION_FAILED', `base_url: ${err.message}; ${PRIVATE_HINT}`);
    throw err;
  }
}

function isPrivateTargetError(err: unknown): err is PrivateTargetError {
  for (let e = err, i = 0; e && i < 5; e = (e as { cause?: unknown }).cause, i++) {
    if ((e as { code?: unknown }).code === PRIVATE_TARGET) return true;
  }
  return false;
}

/** A connection failure as a stable code (ECONNREFUSED, UND_ERR_HEADERS_TIMEOUT), never its text (addresses). */
function connectionFailure(err: unknown): string {
  const code = (err as { code?: unknown })?.code;
  return typeof code === 'string' && /^[A-Z][A-Z0-9_]{1,47}$/.test(code) ? code : 'connection failed';
}

export function registerChannelRoutes(api: Api, ctx: ConsoleContext): void {
  const { sql } = ctx;
  const cols = sql(CHANNEL_COLUMNS);
  // Channel tests without ChannelAllowPrivateNetworks connect through this: its DNS lookup refuses
  // private answers, so a name cannot be rebound to 127.0.0.1 between the check and the connection.
  const guarded = guardedAgent();
  api.app.addHook('onClose', async () => guarded.close());
  // The fleet's channel prober and health notifier (channels/channel-prober.ts): runs while the app
  // does; several console processes share the work through Postgres row claims.
  const prober = new ChannelProber({
    sql, crypto: ctx.apiKeyCrypto, log: ctx.logger,
    settings: {
      firstProbeSec: ctx.config.CHANNEL_PROBE_FIRST_SEC, maxProbeSec: ctx.config.CHANNEL_PROBE_MAX_SEC,
      tickMs: ctx.config.CHANNEL_PROBE_TICK_MS, timeoutMs: ctx.settings.CHANNEL_TEST_TIMEOUT_MS,
      webhookUrl: ctx.config.CHANNEL_HEALTH_WEBHOOK_URL,
    },
    privateNetworksAllowed: () => privateNetworksAllowed(sql),
    invalidate: (message) => ctx.invalidate(message),
    now: () => ctx.now(),
  });
  api.app.addHook('onReady', async () => prober.start());
  api.app.addHook('onClose', async () => prober.stop());

  api.route({
    method: 'POST', path: '/api/channel/', tag: 'admin: channels', access: ROLE.admin, body: createChannelBody, data: channelSchema,
    summary: 'Create a channel (its key is sealed and never returned) and its abilities',
    description: 'base_url must not be (or resolve to) a private, loopback or link-local address unless the root option ChannelAllowPrivateNetworks is true.',
    errors: ['INVALID_JSON', 'UNKNOWN_GROUP'],
  }, async ({ body }) => {
    const groups = body.group ?? ['default'];
    await assertTargetAllowed(sql, body.base_url);
    const channel = await sql.begin(async (tx) => {
      // Checked under the lock a GroupRatio write takes (options/groups.ts): checked before the
      // transaction, a group dropped at the same moment left the channel in a group with no price.
      await lockGroupsShared(tx);
      await assertGroups(tx, groups);
      const [row] = await tx<ChannelRow[]>`
        INSERT INTO channels (type, name, base_url, key_ciphertext, status, models, "group", priority, weight,
                              model_mapping, created_time, auto_ban, fault_threshold, fault_rate_threshold, flex_ratio)
        VALUES (${body.type ?? DEFAULT_CHANNEL_TYPE}, ${body.name}, ${normaliseBaseUrl(body.base_url)},
                ${ctx.apiKeyCrypto.seal(body.key)}, ${body.status ?? CHANNEL_STATUS.enabled},
                ${body.models.join(',')}, ${groups.join(',')}, ${body.priority ?? 0}, ${body.weight ?? 1},
                ${body.model_mapping ?? ''}, ${ctx.now()}, ${body.auto_ban ?? true}, ${body.fault_threshold ?? null},
                ${body.fault_rate_threshold ?? null}, ${body.flex_ratio ?? 1})
        RETURNING ${tx(CHANNEL_COLUMNS)}`;
      await rebuildAbilities(tx, row!);
      return row!;
    });
    await ctx.invalidate({ kind: 'channel', id: Number(channel.id) });
    return ok(toChannel(channel));
  });

  api.route({
    method: 'GET', path: '/api/channel/', tag: 'admin: channels', access: ROLE.admin, query: listChannelsQuery,
    data: pageOf(channelSchema),
    summary: 'List channels (paged, newest first); keyword matches the name in part, group one of its groups, status 1, 2, 3, enabled or disabled',
  }, async ({ query }) => {
    const { page, pageSize, offset } = paging(query);
    const statuses = query.status === undefined ? undefined : STATUS_FILTER[query.status]!;
    const where = sql`WHERE true
      ${query.keyword !== undefined ? sql`AND name ILIKE ${containsPattern(query.keyword)}` : sql``}
      ${query.group !== undefined ? sql`AND ${query.group} = ANY(string_to_array("group", ','))` : sql``}
      ${statuses !== undefined ? sql`AND status IN ${sql(statuses)}` : sql``}`;
    const [rows, [count]] = await Promise.all([
      sql<ChannelRow[]>`SELECT ${cols} FROM channels ${where} ORDER BY id DESC LIMIT ${pageSize} OFFSET ${offset}`,
      sql<{ total: number }[]>`SELECT count(*)::bigint AS total FROM channels ${where}`,
    ]);
    return ok({ items: rows.map(toChannel), total: Number(count!.total), page, page_size: pageSize });
  });

  api.route({
    method: 'GET', path: '/api/channel/:id', tag: 'admin: channels', access: ROLE.admin, params: idParams, data: channelSchema,
    summary: 'One channel (without its key)', errors: ['NOT_FOUND'],
  }, async ({ params }) => {
    const [row] = await sql<ChannelRow[]>`SELECT ${cols} FROM channels WHERE id = ${params.id}`;
    if (!row) throw new ConsoleError('NOT_FOUND', 'channel not found');
    return ok(toChannel(row));
  });

  api.route({
    method: 'PUT', path: '/api/channel/', tag: 'admin: channels', access: ROLE.admin, body: updateChannelBody, data: channelSchema,
    summary: 'Update a channel: any creation field (key only when given); abilities are rebuilt in the same transaction',
    description: 'A new base_url needs the key in the same request (the stored key is only ever sent to the host it was ' +
      'entered for), and is checked like at creation.',
    errors: ['INVALID_JSON', 'UNKNOWN_GROUP', 'NOT_FOUND'],
  }, async ({ body }) => {
    const baseUrl = body.base_url === undefined ? undefined : normaliseBaseUrl(body.base_url);
    if (baseUrl !== undefined) {
      const [current] = await sql<{ base_url: string }[]>`SELECT base_url FROM channels WHERE id = ${body.id}`;
      if (current && current.base_url !== baseUrl) await assertTargetAllowed(sql, baseUrl);
    }
    const channel = await sql.begin(async (tx) => {
      // As at creation: the group check and a GroupRatio write dropping the group run one after the other.
      if (body.group) {
        await lockGroupsShared(tx);
        await assertGroups(tx, body.group);
      }
      const [before] = await tx<ChannelRow[]>`SELECT ${tx(CHANNEL_COLUMNS)} FROM channels WHERE id = ${body.id} FOR UPDATE`;
      if (!before) throw new ConsoleError('NOT_FOUND', 'channel not found');
      // Otherwise an administrator could send the stored credential to a host of theirs and read it.
      if (baseUrl !== undefined && baseUrl !== before.base_url && body.key === undefined) {
        throw new ConsoleError('VALIDATION_FAILED', 'key: is required when base_url changes (the stored key is only sent to the host it was entered for)');
      }
      // An administrator's status change is recorded like the automatic ones, without a webhook
      // notice (status_notified_time), and restarts the relays' fault counts (status_time).
      const statusChanged = body.status !== undefined && body.status !== Number(before.status);
      const now = ctx.now();
      const [row] = await tx<ChannelRow[]>`
        UPDATE channels SET
          type = ${body.type ?? before.type},
          name = ${body.name ?? before.name},
          base_url = ${baseUrl ?? before.base_url},
          ${body.key !== undefined ? tx`key_ciphertext = ${ctx.apiKeyCrypto.seal(body.key)},` : tx``}
          status = ${body.status ?? before.status},
          models = ${body.models ? body.models.join(',') : before.models},
          "group" = ${body.group ? body.group.join(',') : before.group},
          priority = ${body.priority ?? before.priority},
          weight = ${body.weight ?? before.weight},
          model_mapping = ${body.model_mapping ?? before.model_mapping},
          auto_ban = ${body.auto_ban ?? before.auto_ban},
          fault_threshold = ${body.fault_threshold === undefined ? before.fault_threshold : body.fault_threshold},
          fault_rate_threshold = ${body.fault_rate_threshold === undefined ? before.fault_rate_threshold : body.fault_rate_threshold},
          flex_ratio = ${body.flex_ratio ?? before.flex_ratio},
          ${statusChanged ? tx`status_reason = 'set by an administrator', status_time = ${now}, status_notified_time = ${now},
                               probe_failures = 0,` : tx``}
          ${statusChanged ? tx`next_probe_time = ${body.status === CHANNEL_STATUS.autoDisabled ? now : 0},` : tx``}
          id = id
        WHERE id = ${body.id}
        RETURNING ${tx(CHANNEL_COLUMNS)}`;
      await rebuildAbilities(tx, row!);
      return row!;
    });
    await ctx.invalidate({ kind: 'channel', id: Number(channel.id) });
    return ok(toChannel(channel));
  });

  api.route({
    method: 'DELETE', path: '/api/channel/:id', tag: 'admin: channels', access: ROLE.admin, params: idParams,
    summary: 'Delete a channel and its abilities', errors: ['NOT_FOUND'],
  }, async ({ params }) => {
    const rows = await sql`DELETE FROM channels WHERE id = ${params.id} RETURNING id`;
    if (rows.length === 0) throw new ConsoleError('NOT_FOUND', 'channel not found');
    await ctx.invalidate({ kind: 'channel', id: params.id });
    return ok();
  });

  api.route({
    method: 'GET', path: '/api/channel/test/:id', tag: 'admin: channels', access: ROLE.admin, params: idParams, query: testChannelQuery,
    data: z.object({ time: z.number(), response_time: z.number().int(), model: z.string(), status_code: z.number().int() }),
    summary: "Send a one-token request to the channel with its key; report the response time",
    description: 'model: default the first of the channel\'s models (model_mapping applied). The request is a Messages call ' +
      '(POST {base_url}/v1/messages, x-api-key, max_tokens 1), or for an OpenAI-format channel (type 1) a Chat Completions call ' +
      '(POST {base_url}/v1/chat/completions, Authorization: Bearer, max_tokens 1, max_completion_tokens 1 for OpenAI\'s ' +
      'reasoning models o1, o3, o4, gpt-5…). As new-api, a failed test is ' +
      'HTTP 200 with success false and a message naming the provider\'s status and error type (never its body), or the ' +
      'connection error code; data then carries status_code (0 when nothing answered). Without ChannelAllowPrivateNetworks a ' +
      'base_url that is or resolves to a private, loopback or link-local address is refused the same way.',
    errors: ['NOT_FOUND'],
  }, async ({ params, query, request }) => {
    const [row] = await sql<(ChannelRow & { key_ciphertext: Buffer })[]>`SELECT * FROM channels WHERE id = ${params.id}`;
    if (!row) throw new ConsoleError('NOT_FOUND', 'channel not found');
    const requested = query.model ?? row.models.split(',')[0] ?? '';
    const model = mappedModel(row.model_mapping, requested);
    const allowPrivate = await privateNetworksAllowed(sql);
    const timeout = ctx.settings.CHANNEL_TEST_TIMEOUT_MS;
    const started = performance.now();
    // One deadline for the whole exchange: undici's headersTimeout and bodyTimeout are idle timeouts
    // (an upstream sending one byte every few seconds never meets them); this signal ends the lookup,
    // the connection, the wait for headers and the reading of the body alike.
    const signal = AbortSignal.timeout(timeout);
    let status = 0;
    let failure = '';
    try {
      // Address literals never reach a DNS lookup: checked here; names are checked here and again
      // by the guarded agent's own lookup.
      if (!allowPrivate) await beforeDeadline(checkTarget(row.base_url), signal);
      // One output token in the channel's format: Messages for Anthropic, Chat Completions with a
      // Bearer key for an OpenAI-format channel (type 1).
      const call = oneTokenRequest(Number(row.type), row.base_url, ctx.apiKeyCrypto.open(row.key_ciphertext), model, 'hi');
      const res = await httpRequest(call.url, {
        method: 'POST',
        headers: call.headers,
        body: call.body,
        headersTimeout: timeout,
        bodyTimeout: timeout,
        signal,
        ...(allowPrivate ? {} : { dispatcher: guarded }),
      });
      status = res.statusCode;
      // Read only to find the error type; the body itself is never answered. The signal ends the read.
      const head = await readHead(res.body, 64 * 1024);
      if (status !== 200) {
        const type = providerErrorType(head);
        failure = `channel test failed: HTTP ${status}${type ? ` ${type}` : ''}`;
      }
    } catch (err) {
      if (signal.aborted) {
        failure = `channel test failed: timed out (no complete answer within ${timeout} ms)`;
        request.log.info({ channel: Number(row.id), timeout_ms: timeout }, 'channel test timed out');
      } else {
        failure = isPrivateTargetError(err)
          ? `channel test refused: base_url ${(err as Error).message}; ${PRIVATE_HINT}`
          : `channel test failed: ${connectionFailure(err)}`;
        if (!isPrivateTargetError(err)) request.log.info({ err, channel: Number(row.id) }, 'channel test could not reach the upstream');
      }
    }
    const elapsedMs = Math.round(performance.now() - started);
    const data = { time: elapsedMs / 1000, response_time: elapsedMs, model, status_code: status };
    // An administrator's channel failing is not this server failing: 200 with success false (new-api's answer).
    if (failure) return { success: false, message: failure, data };
    await sql`UPDATE channels SET response_time = ${elapsedMs}, test_time = ${ctx.now()} WHERE id = ${row.id}`;
    return ok(data);
  });
}
