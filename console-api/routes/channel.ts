// /api/channel/: administrators add upstream channels. The channel key is sealed with the API-key
// crypto (AES-256-GCM) and never returned. The abilities rows (group x model) are rebuilt in the same
// transaction, so routing never sees a channel without its abilities or the reverse.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { ROLE } from '../accounts/roles.js';
import type { RequireUser } from '../auth/require-user.js';
import type { ConsoleContext } from '../context.js';
import type { Db } from '../db.js';
import { ok } from '../http/envelope.js';
import { ConsoleError } from '../http/errors.js';
import { parseInput } from '../http/validation.js';
import { accountGroups } from '../options/ratios.js';

/** new-api's numbering: 1 enabled, 2 disabled by an administrator, 3 disabled automatically. */
export const CHANNEL_STATUS = { enabled: 1, manuallyDisabled: 2, autoDisabled: 3 } as const;
/** new-api's channel type of the Anthropic (Claude) API. */
export const DEFAULT_CHANNEL_TYPE = 14;

function commaList(field: string) {
  return z
    .union([z.string({ error: `must be a comma-separated string or an array of strings` }), z.array(z.string())], {
      error: 'must be a comma-separated string or an array of strings',
    })
    .transform((v) => [...new Set((Array.isArray(v) ? v : v.split(',')).map((s) => s.trim()).filter(Boolean))])
    .refine((list) => list.length > 0, { error: `must name at least one ${field}` });
}

const modelMapping = z
  .union([z.string(), z.record(z.string(), z.string()), z.null()], {
    error: 'must be a JSON object of model name to model name',
  })
  .transform((v, c) => {
    if (v === null || v === '') return '';
    if (typeof v !== 'string') return JSON.stringify(v);
    try {
      const parsed: unknown = JSON.parse(v);
      if (parsed && typeof parsed === 'object' && !Array.isArray(parsed) && Object.values(parsed).every((x) => typeof x === 'string')) {
        return JSON.stringify(parsed);
      }
    } catch {
      // fall through
    }
    c.addIssue({ code: 'custom', message: 'must be a JSON object of model name to model name' });
    return z.NEVER;
  });

export const createChannelBody = z.object({
  name: z.string({ error: 'must be a string' }).min(1, { error: 'is required' }).max(100, { error: 'must be at most 100 characters' }),
  type: z.number({ error: 'must be an integer' }).int({ error: 'must be an integer' }).min(0).optional(),
  base_url: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }).max(2048),
  key: z.string({ error: 'must be a string' }).min(1, { error: 'is required' }).max(10_000),
  models: commaList('model'),
  group: commaList('group').optional(),
  priority: z.number({ error: 'must be an integer' }).int({ error: 'must be an integer' }).optional(),
  weight: z.number({ error: 'must be an integer' }).int({ error: 'must be an integer' }).min(0, { error: 'must be at least 0' }).optional(),
  model_mapping: modelMapping.optional(),
  status: z
    .union([z.literal(1), z.literal(2), z.literal(3)], { error: 'must be 1 (enabled), 2 or 3 (disabled)' })
    .optional(),
});

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
}

/** Replaces the channel's abilities with one row per (group, model). Run inside the channel's transaction. */
export async function rebuildAbilities(tx: Db, channel: ChannelRow): Promise<void> {
  await tx`DELETE FROM abilities WHERE channel_id = ${channel.id}`;
  const groups = channel.group.split(',').filter(Boolean);
  const models = channel.models.split(',').filter(Boolean);
  const rows = groups.flatMap((group) =>
    models.map((model) => ({
      group,
      model,
      channel_id: channel.id,
      enabled: channel.status === CHANNEL_STATUS.enabled,
      priority: channel.priority,
      weight: channel.weight,
    })),
  );
  if (rows.length > 0) {
    await tx`INSERT INTO abilities ${tx(rows, 'group', 'model', 'channel_id', 'enabled', 'priority', 'weight')}`;
  }
}

export function registerChannelRoutes(app: FastifyInstance, ctx: ConsoleContext, requireUser: RequireUser): void {
  const { sql } = ctx;

  app.post('/api/channel/', { preHandler: requireUser(ROLE.admin) }, async (request) => {
    const body = parseInput(createChannelBody, request.body);
    const groups = body.group ?? ['default'];
    const known = await accountGroups(sql);
    const unknown = groups.find((g) => !known.includes(g));
    if (unknown !== undefined) throw new ConsoleError('UNKNOWN_GROUP', `group: unknown group "${unknown}"`);
    const channel = await sql.begin(async (tx) => {
      const [row] = await tx<ChannelRow[]>`
        INSERT INTO channels (type, name, base_url, key_ciphertext, status, models, "group", priority, weight,
                              model_mapping, created_time)
        VALUES (${body.type ?? DEFAULT_CHANNEL_TYPE}, ${body.name}, ${body.base_url.replace(/\/+$/, '')},
                ${ctx.apiKeyCrypto.seal(body.key)}, ${body.status ?? CHANNEL_STATUS.enabled},
                ${body.models.join(',')}, ${groups.join(',')}, ${body.priority ?? 0}, ${body.weight ?? 1},
                ${body.model_mapping ?? ''}, ${ctx.now()})
        RETURNING id, type, name, base_url, status, models, "group", priority, weight, model_mapping,
                  created_time, used_quota`;
      await rebuildAbilities(tx, row!);
      return row!;
    });
    await ctx.invalidate({ kind: 'channel', id: channel.id });
    return ok(channel);
  });
}
