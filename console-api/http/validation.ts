// Every body and query is parsed with a zod schema at the edge. A failure becomes a 400 whose message
// names the offending field, e.g. "name: must be at most 50 characters".
import { z } from 'zod';
import { ConsoleError } from './errors.js';

export function describeZodError(error: z.ZodError, root = 'body'): string {
  return error.issues
    .map((issue) => {
      const path = issue.path.map(String).join('.');
      return `${path || root}: ${issue.message}`;
    })
    .join('; ');
}

/** Parses `input` or throws VALIDATION_FAILED naming each bad field. */
export function parseInput<S extends z.ZodType>(schema: S, input: unknown, root = 'body'): z.output<S> {
  const result = schema.safeParse(input);
  if (!result.success) throw new ConsoleError('VALIDATION_FAILED', describeZodError(result.error, root));
  return result.data;
}

/** Query strings arrive as strings; an empty value (`?type=`) counts as absent. */
const blankToUndefined = (v: unknown) => (v === '' || v === null ? undefined : v);

export function queryInt(opts: { min?: number; max?: number } = {}) {
  let n = z.coerce.number({ error: 'must be an integer' }).int({ error: 'must be an integer' });
  if (opts.min !== undefined) n = n.min(opts.min, { error: `must be at least ${opts.min}` });
  if (opts.max !== undefined) n = n.max(opts.max, { error: `must be at most ${opts.max}` });
  return z.preprocess(blankToUndefined, n.optional());
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

/** `:id` path parameters: a positive integer. */
export const idParams = z.object({
  id: z.coerce.number({ error: 'must be an integer' }).int({ error: 'must be an integer' }).positive({ error: 'must be a positive integer' }).max(Number.MAX_SAFE_INTEGER),
});

export const DEFAULT_PAGE_SIZE = 10;
export const MAX_PAGE_SIZE = 100;

/** `p` (or its alias `page`) from 1, `page_size` default 10; above 100 is served as 100. */
export const pageQuery = z.object({
  p: queryInt({ min: 1, max: 1_000_000 }),
  page: queryInt({ min: 1, max: 1_000_000 }),
  page_size: queryInt({ min: 1 }),
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
