// Every body and query is parsed with a zod schema at the edge. A failure becomes a 400 whose message
// names the offending field, e.g. "name: must be at most 50 characters".
import { z } from 'zod';
import { mixesLookAlikeScripts } from '../accounts/username-scripts.js';
import { ConsoleError } from './errors.js';

/**
 * "field: problem" for each field at fault, once per field (the first problem: `id: Too big: …; id: is
 * too large` said one thing twice). With the `input` at hand, a field left out "is required" (it
 * said the type it should have had, "must be a string"), and zod's own wording ("Too big: expected
 * int to be <=…", "Invalid input: expected string, received array") is put in the API's words.
 */
export function describeZodError(error: z.ZodError, root = 'body', input?: unknown): string {
  const seen = new Set<string>();
  const parts: string[] = [];
  for (const issue of error.issues) {
    const path = issue.path.map(String).join('.');
    if (seen.has(path)) continue;
    seen.add(path);
    parts.push(`${path || root}: ${plainMessage(issue, input, root)}`);
  }
  return parts.join('; ');
}

/** zod's default messages; the schemas' own all start in lower case ("must …", "is …"). */
const LIBRARY_WORDING = /^(?:Too (?:big|small)|Invalid)\b/;

function plainMessage(issue: z.core.$ZodIssue, input: unknown, root: string): string {
  const at = valueAt(input, issue.path);
  if (issue.code === 'invalid_type' && at.missing) return 'is required';
  if (!LIBRARY_WORDING.test(issue.message)) return issue.message;
  switch (issue.code) {
    case 'too_big': return `must be at most ${String(issue.maximum)}${unitOf(issue.origin)}`;
    case 'too_small': return `must be at least ${String(issue.minimum)}${unitOf(issue.origin)}`;
    case 'invalid_type':
      // A query parameter given twice arrives as an array.
      return root === 'query' && Array.isArray(at.value) ? `must be given once, as ${kindOf(issue.expected)}` : `must be ${kindOf(issue.expected)}`;
    case 'invalid_value': return `must be one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')}`;
    default: return 'is not valid';
  }
}

function kindOf(expected: string): string {
  const kinds: Record<string, string> = { object: 'a JSON object', array: 'an array', string: 'a string', number: 'a number', int: 'an integer', boolean: 'a boolean' };
  return kinds[expected] ?? `of type ${expected}`;
}

function unitOf(origin: string): string {
  return origin === 'string' ? ' characters' : origin === 'array' || origin === 'set' ? ' items' : '';
}

/** The input's value at a path, and whether its last key is absent from an object that is there. */
function valueAt(input: unknown, path: readonly PropertyKey[]): { value: unknown; missing: boolean } {
  let value = input;
  for (let i = 0; i < path.length; i++) {
    if (value === null || typeof value !== 'object') return { value: undefined, missing: false };
    const key = path[i]!;
    if (i === path.length - 1 && !Object.prototype.hasOwnProperty.call(value, key)) return { value: undefined, missing: true };
    value = (value as Record<PropertyKey, unknown>)[key];
  }
  return { value, missing: false };
}

/** Parses `input` or throws VALIDATION_FAILED naming each bad field. */
export function parseInput<S extends z.ZodType>(schema: S, input: unknown, root = 'body'): z.output<S> {
  const result = schema.safeParse(input);
  if (!result.success) throw new ConsoleError('VALIDATION_FAILED', describeZodError(result.error, root, input));
  return result.data;
}

/** Console inputs are flat or a few levels deep (GroupRateLimits is three); 32 leaves room. */
export const MAX_INPUT_DEPTH = 32;

function fieldName(path: string, root: string): string {
  const name = path || root;
  return name.length > 100 ? `${name.slice(0, 100)}…` : name;
}

/**
 * The first hostile shape in a parsed input, as a VALIDATION_FAILED message naming the field: a U+0000
 * anywhere (Postgres text cannot hold it and answers an error), or nesting deeper than MAX_INPUT_DEPTH
 * (JSON.stringify and other recursive code would overflow the stack). Breadth-first with its own
 * queue, so the walk itself never recurses, whatever the input.
 */
export function hostileInputProblem(input: unknown, root: string): string | undefined {
  const queue: { value: unknown; path: string; depth: number }[] = [{ value: input, path: '', depth: 0 }];
  for (let i = 0; i < queue.length; i++) {
    const { value, path, depth } = queue[i]!;
    if (typeof value === 'string') {
      if (value.includes('\u0000')) return `${fieldName(path, root)}: must not contain NUL (U+0000) characters`;
      continue;
    }
    if (value === null || typeof value !== 'object') continue;
    if (depth >= MAX_INPUT_DEPTH) return `${fieldName(path, root)}: is nested more than ${MAX_INPUT_DEPTH} levels deep`;
    for (const [key, child] of Object.entries(value)) {
      if (key.includes('\u0000')) return `${fieldName(path, root)}: a property name must not contain NUL (U+0000) characters`;
      const reserved = reservedPropertyProblem(key, child);
      if (reserved) return `${fieldName(path, root)}: ${reserved}`;
      queue.push({ value: child, path: path ? `${path}.${key}` : key, depth: depth + 1 });
    }
  }
  return undefined;
}

/**
 * `__proto__` as a property name, or `constructor` holding `prototype`: what Fastify's JSON parser
 * refused (prototype poisoning) with "request body is not valid JSON", although the JSON is valid.
 * The body is now parsed as JSON.parse does (such a key is an own property and sets no prototype),
 * and refused here, naming the property. Refused rather than dropped: code that copies the object
 * (Object.assign, `out[k] = v`) would set a prototype from it, and the relay's ratio tables drop a
 * model named `__proto__` (core/pricing/ratios.ts parseTable), so a price sent for it would be lost.
 */
export function reservedPropertyProblem(key: string, value: unknown): string | undefined {
  if (key === '__proto__') return 'the property name "__proto__" is refused (it names an object\'s prototype)';
  if (key === 'constructor' && value !== null && typeof value === 'object' && Object.hasOwn(value, 'prototype')) {
    return 'a property "constructor" holding "prototype" is refused (prototype poisoning)';
  }
  return undefined;
}

/** Throws VALIDATION_FAILED when hostileInputProblem finds something. */
export function assertSafeInput(input: unknown, root: string): void {
  const problem = hostileInputProblem(input, root);
  if (problem) throw new ConsoleError('VALIDATION_FAILED', problem);
}

/** Bounds of a Postgres INT (int4) column: a larger value would make the INSERT fail with a 500. */
export const INT32_MIN = -(2 ** 31);
export const INT32_MAX = 2 ** 31 - 1;

/** An integer that fits an INT column, at least `min` (default the column's minimum). */
export function int32(min = INT32_MIN) {
  return z
    .number({ error: 'must be an integer' })
    .int({ error: 'must be an integer' })
    .min(min, { error: `must be at least ${min}` })
    .max(INT32_MAX, { error: `must be at most ${INT32_MAX}` });
}

/**
 * A name people read (display names, key, channel and redemption names): at most `max` characters,
 * without control characters (they garble the lists and logs the name is shown in) and without the
 * invisible format characters that make one name look like another: the bidirectional overrides and
 * isolates (U+202E turns "abc" into "cba"), zero-width space and word joiners, the BOM. The zero-width
 * joiner and non-joiner stay: emoji sequences (👨‍👩‍👧) and Persian or Indic text need them.
 */
const HIDDEN_OR_CONTROL = /[\p{Cc}\p{Cs}\p{Cn}\u061C\u200B\u200E\u200F\u202A-\u202E\u2060-\u2064\u2066-\u2069\uFEFF]/u;

export function displayText(max: number, required?: { min: number; message: string }) {
  const text = z.string({ error: 'must be a string' });
  return (required ? text.min(required.min, { error: required.message }) : text)
    .max(max, { error: `must be at most ${max} characters` })
    .refine((s) => !HIDDEN_OR_CONTROL.test(s), { error: 'must not contain control or invisible formatting characters' });
}

/** HIDDEN_OR_CONTROL, every occurrence. */
const HIDDEN_OR_CONTROL_ALL = new RegExp(HIDDEN_OR_CONTROL.source, 'gu');
/** A terminal escape sequence (CSI `ESC [ … m`, OSC `ESC ] … BEL`, or a two-character one): dropped whole, not only its ESC. */
const TERMINAL_ESCAPE = /\u001b(?:\[[0-?]*[ -/]*[@-~]|\][^\u0007\u001b]*(?:\u0007|\u001b\\)|[@-_])/gu;
/** Line and paragraph breaks, tabs: a space between the words they separated. */
const BREAKS = /[\t\n\v\f\r\u0085\u2028\u2029]+/gu;
const graphemes = new Intl.Segmenter(undefined, { granularity: 'grapheme' });

/**
 * Text a person did not type here, made a displayText(max): an identity provider's `name` claim, which
 * most providers let their users set freely. Refusing it would refuse a legitimate sign-in, so it is
 * cleaned instead: terminal escape sequences and displayText's control and invisible formatting
 * characters dropped (NUL among them), line breaks and tabs made spaces, then cut to at most `max`
 * UTF-16 units (displayText's measure) at a grapheme boundary, so neither half a surrogate pair
 * (stored as U+FFFD) nor part of an emoji sequence is left. '' when nothing readable is left: the
 * caller falls back to a derived name.
 */
export function toDisplayText(raw: string, max: number): string {
  const cleaned = raw.replace(TERMINAL_ESCAPE, '').replace(BREAKS, ' ').replace(HIDDEN_OR_CONTROL_ALL, '').replace(/ {2,}/gu, ' ').trim();
  let cut = '';
  for (const { segment } of graphemes.segment(cleaned)) {
    if (cut.length + segment.length > max) break;
    cut += segment;
  }
  cut = cut.trim();
  // The schema itself has the last word: what it would refuse is not returned.
  return displayText(max).safeParse(cut).success ? cut : '';
}

/**
 * A username, as registration takes it (and an administrator's rename, and an account sign-on
 * creates): 3 to 20 characters, no spaces or control characters, letters of one of the look-alike
 * scripts only (accounts/username-scripts.ts).
 */
export const usernameSchema = z
  .string({ error: 'must be a string' })
  .min(3, { error: 'must be at least 3 characters' })
  .max(20, { error: 'must be at most 20 characters' })
  .regex(/^[^\s\p{C}]+$/u, { error: 'must not contain spaces or control characters' })
  .refine((s) => !mixesLookAlikeScripts(s), { error: 'must not mix Latin, Greek and Cyrillic letters (they have look-alikes: a Cyrillic а reads as a Latin a)' });

/** An e-mail address as registration takes it (sign-on takes a provider's by a looser rule: oidc/oidc-routes.ts providerAddress). */
export const emailAddress = z.email({ error: 'must be an e-mail address' }).max(254, { error: 'must be at most 254 characters' });

/**
 * A name a resource must have (API keys, redemption codes, channels): displayText, and neither empty
 * nor only spaces ("is required" either way; a blank name lists as an empty cell that cannot be told
 * apart or searched for). Stored as sent.
 */
export function requiredName(max: number) {
  return nonBlankText(max, 'is required');
}

/**
 * displayText that is neither empty nor only white space (`message` either way): a name that, once
 * set, must stay readable (an account's display name in an edit). JavaScript's trim() white space:
 * spaces, tabs, no-break and ideographic spaces.
 */
export function nonBlankText(max: number, message: string) {
  // '' is refused by the length (the document says minLength 1), a blank name by the refinement: one message each.
  return displayText(max, { min: 1, message }).refine((s) => s === '' || s.trim() !== '', { error: message });
}

/**
 * The latest Unix time (seconds) the console stores as a date (an API key's or a redemption code's
 * expired_time): 9999-12-31 23:59:59 UTC. Beyond it a date has more than four digits of year, and far
 * beyond (Date's limit, 8.64e12 s) JavaScript cannot represent it at all: the web console showed
 * 9007199254740991 as "NaN-NaN-NaN".
 */
export const MAX_UNIX_TIME = 253_402_300_799;

/** An expired_time: an integer from -1 (never expires; `minMessage` below it) to MAX_UNIX_TIME; the handlers check it is in the future. */
export function expiryTime(minMessage: string) {
  return z
    .number({ error: 'must be an integer' })
    .int({ error: 'must be an integer' })
    .min(-1, { error: minMessage })
    .max(MAX_UNIX_TIME, { error: `must be at most ${MAX_UNIX_TIME} (9999-12-31 23:59:59 UTC)` });
}

/**
 * Whether an address names a user or a password before its host (`https://user:pw@host`,
 * `https://user@host`). Such an address is shown back to whoever reads it (a channel to every
 * administrator, TopUpLink to every account): addresses are refused with them.
 */
export function hasUrlCredentials(url: string): boolean {
  try {
    const u = new URL(url);
    return u.username !== '' || u.password !== '';
  } catch {
    return false;
  }
}

/** Query strings arrive as strings; an empty value (`?type=`) counts as absent. */
const blankToUndefined = (v: unknown) => (v === '' || v === null ? undefined : v);

/** A query integer as written by people and clients: decimal digits, a minus sign only where negatives are allowed. */
const SIGNED_DIGITS = /^-?[0-9]+$/;
const DIGITS = /^[0-9]+$/;
/** Digits past a safe integer's 16: a number too large to hold exactly, read as larger than any bound. */
const SAFE_DIGITS = 16;

/**
 * An integer query parameter, in decimal digits only (with a leading minus when `min` is negative).
 * Number() would also read `0x10` as 16, `1e3` as 1000, ` 5`, `+5` and `5.0` as 5: one value under
 * many spellings (`?p=0x10` served page 16). Anything else is refused; an empty value is absent.
 */
export function queryInt(opts: { min?: number; max?: number; saturate?: boolean } = {}) {
  const negative = opts.min === undefined || opts.min < 0;
  const pattern = negative ? SIGNED_DIGITS : DIGITS;
  const rule = negative ? 'must be an integer (decimal digits, optionally after a minus sign)' : 'must be an integer (decimal digits only)';
  let n = z.number({ error: 'must be an integer' }).int({ error: 'must be an integer' });
  if (opts.min !== undefined) n = n.min(opts.min, { error: `must be at least ${opts.min}` });
  n = n.max(opts.max ?? Number.MAX_SAFE_INTEGER, { error: `must be at most ${opts.max ?? Number.MAX_SAFE_INTEGER}` });
  // Checked and converted in the preprocess step, so that the schema's input (the OpenAPI document,
  // the web console's types) stays an integer.
  return z.preprocess((v, c) => {
    const value = blankToUndefined(v);
    if (value === undefined || typeof value === 'number') return value;
    // A query parameter given twice arrives as an array: said as the other kinds say it (plainMessage).
    if (Array.isArray(value)) {
      c.addIssue({ code: 'custom', message: 'must be given once, as an integer', input: v });
      return z.NEVER;
    }
    if (typeof value !== 'string' || !pattern.test(value)) {
      c.addIssue({ code: 'custom', message: rule, input: v });
      return z.NEVER;
    }
    // Many digits are a large number, not a wrong spelling: past the bound (a page size is served at
    // its maximum, `saturate`), where "decimal digits only" was said of a value that was only that.
    if (value.replace(/^-?0*/, '').length > SAFE_DIGITS) {
      const below = value.startsWith('-');
      if (opts.saturate && !below) return Number.MAX_SAFE_INTEGER;
      c.addIssue({ code: 'custom', message: below ? `must be at least ${opts.min ?? Number.MIN_SAFE_INTEGER}` : `must be at most ${opts.max ?? Number.MAX_SAFE_INTEGER}`, input: v });
      return z.NEVER;
    }
    return Number(value);
  }, n.optional());
}

export function queryString(max = 200) {
  return z.preprocess(blankToUndefined, z.string().max(max, { error: `must be at most ${max} characters` }).optional());
}

/** A JSON safe integer (quota values are BIGINT in Postgres but numbers in JSON). */
export const safeInt = z
  .number({ error: 'must be an integer' })
  .int({ error: 'must be an integer' })
  .min(Number.MIN_SAFE_INTEGER)
  .max(Number.MAX_SAFE_INTEGER, { error: 'is too large' });

/**
 * `:id` path parameters: a positive integer written in decimal digits only. Number() would also read
 * ` 1`, `+1`, `1e0` and `0x1` as 1: one row reachable under many names is how a DELETE meant for one
 * path lands on another, so anything but plain digits is refused.
 */
export const idParams = z.object({
  id: z.string({ error: 'must be a positive integer' })
    .regex(/^[0-9]{1,16}$/, { error: 'must be a positive integer (decimal digits only)' })
    .transform(Number)
    .pipe(z.number().int().positive({ error: 'must be a positive integer' }).max(Number.MAX_SAFE_INTEGER, { error: 'is too large' })),
});

export const DEFAULT_PAGE_SIZE = 10;
export const MAX_PAGE_SIZE = 100;

/** `p` (or its alias `page`) from 1, `page_size` default 10; above 100 is served as 100. */
export const pageQuery = z.object({
  p: queryInt({ min: 1, max: 1_000_000 }),
  page: queryInt({ min: 1, max: 1_000_000 }),
  page_size: queryInt({ min: 1, saturate: true }).describe(`default ${DEFAULT_PAGE_SIZE}; above ${MAX_PAGE_SIZE} is served as ${MAX_PAGE_SIZE}`),
});

export function paging(q: { p?: number; page?: number; page_size?: number }): { page: number; pageSize: number; offset: number } {
  const page = q.p ?? q.page ?? 1;
  const pageSize = Math.min(q.page_size ?? DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE);
  return { page, pageSize, offset: (page - 1) * pageSize };
}

/** A LIKE pattern matching `s` anywhere, with LIKE's wildcards in `s` escaped. */
export function containsPattern(s: string): string {
  return `%${s.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}
