// /api/option/: the options table (option-catalogue.ts). Administrators (10) read every option (a
// secret's value reads as '' with configured telling whether it is set): their pages need some (the
// account groups of GroupRatio, the currency and price of the top-up orders). Only the super
// administrator (100) changes any, as new-api puts /api/option/ behind RootAuth: the pricing tables,
// groups and top-up link decide what every account is billed and where it pays. Secrets are stored
// sealed (storedOptionText). Each change is logged with who made it (a secret's value never) and
// publishes {kind: 'options', keys: [key]}.
import { z } from 'zod';
import { ROLE } from '../accounts/roles.js';
import type { ConsoleContext } from '../context.js';
import type { Api } from '../http/api.js';
import { ok } from '../http/envelope.js';
import { ConsoleError } from '../http/errors.js';
import { optionItemSchema } from '../http/schemas.js';
import { describeZodError } from '../http/validation.js';
import { loadOptionView, OPTION_CATALOGUE, optionConflict, optionDef, storedOptionText } from '../options/option-catalogue.js';
import { GROUP_OPTION_LOCK } from '../options/groups.js';

/** Longest part of a new value an option change's log line holds (a pricing table can be long). */
export const LOGGED_OPTION_VALUE_CHARS = 200;

/**
 * What an option change's log line says of the new value: a secret's nothing (`secret_option`; a
 * field named `secret` would be censored by the logger), another's start.
 */
export function loggedOptionValue(secret: boolean, text: string): { value?: string; value_chars?: number; secret_option?: true } {
  if (secret) return { secret_option: true };
  return text.length > LOGGED_OPTION_VALUE_CHARS
    ? { value: `${text.slice(0, LOGGED_OPTION_VALUE_CHARS)}…`, value_chars: text.length }
    : { value: text };
}

export const updateOptionBody = z.object({
  key: z.string({ error: 'must be a string' }).min(1, { error: 'is required' }).max(100, { error: 'must be at most 100 characters' }),
  /** Stored as text: numbers and booleans are converted (true → "true"); objects and arrays to JSON. */
  value: z.union([z.string(), z.number(), z.boolean(), z.array(z.unknown()), z.record(z.string(), z.unknown())], {
    error: 'must be a string, number, boolean, array or object',
  }),
});

export function registerOptionRoutes(api: Api, ctx: ConsoleContext): void {
  const { sql } = ctx;

  api.route({
    method: 'GET', path: '/api/option/', tag: 'admin: options', access: ROLE.admin, data: z.array(optionItemSchema),
    summary: 'Every option with its value (secrets blank), who may change it and what it means',
  }, async () => {
    const o = await loadOptionView(sql);
    return ok(OPTION_CATALOGUE.map((d) => ({
      key: d.key,
      value: d.secret ? '' : o.raw(d.key),
      secret: d.secret ?? false,
      configured: o.configured(d.key),
      write_role: d.writeRole,
      description: d.description,
    })));
  });

  api.route({
    method: 'PUT', path: '/api/option/', tag: 'admin: options', access: ROLE.admin, body: updateOptionBody,
    summary: 'Set one option {key, value}; every option needs role 100 (the super administrator), as in new-api',
    errors: ['INVALID_JSON'],
  }, async ({ body, user, request }) => {
    const d = optionDef(body.key);
    if (!d) throw new ConsoleError('VALIDATION_FAILED', `key: unknown option "${body.key}"`);
    if (user.role < d.writeRole) throw new ConsoleError('INSUFFICIENT_ROLE', `only the super administrator may change ${d.key}`);
    const text = typeof body.value === 'string' ? body.value : typeof body.value === 'object' ? JSON.stringify(body.value) : String(body.value);
    const parsed = d.schema.safeParse(text);
    if (!parsed.success) throw new ConsoleError('VALIDATION_FAILED', describeZodError(parsed.error, 'value').replace(/^value(\.[^:]*)?:/, `value (${d.key}):`));
    // URLs are stored without a trailing slash; everything else as given.
    const stored = storedOptionText(d, typeof parsed.data === 'string' && /Address$/.test(d.key) ? parsed.data : text);
    await sql.begin(async (tx) => {
      // A value that fits its schema may still strand what uses it (a group an account is in, one
      // AutoGroups names) or name what does not exist (an AutoGroups entry GroupRatio lacks). Such
      // checks and the write run one at a time, so that GroupRatio and AutoGroups changed at once
      // cannot each pass against the other's old value. The writers that place an account or a
      // channel in a group take the same lock shared (options/groups.ts lockGroupsShared), so a
      // GroupRatio dropping a group and an account moved into it cannot both pass either.
      if (d.conflict) await tx`SELECT pg_advisory_xact_lock(${GROUP_OPTION_LOCK})`;
      const conflict = await optionConflict(tx, d, parsed.data);
      if (conflict) throw new ConsoleError('VALIDATION_FAILED', `value (${d.key}): ${conflict}`);
      await tx`INSERT INTO options (key, value) VALUES (${d.key}, ${stored}) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`;
    });
    // Who changed what: prices and groups bill every account. Not under a `key` field, which the
    // logger censors; a secret's value is never logged, sealed or not.
    request.log.info({ userId: user.id, username: user.username, option: d.key, ...loggedOptionValue(d.secret ?? false, stored) }, 'option changed');
    await ctx.invalidate({ kind: 'options', keys: [d.key] });
    return ok();
  });
}
