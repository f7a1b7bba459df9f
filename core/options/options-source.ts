// The options table (new-api's key → value settings: ratios, groups, ...) as the relay and the console
// both read it; each parses the values it needs (core/pricing/ratios.ts, core/groups/group-policy.ts).
import type { Queryable } from '../../infra/postgres/client.js';

/**
 * The options table as a map, or only the rows named by `keys`. The relay reads it at start and
 * again whenever the console announces a change; the console reads the rows it is answering from.
 */
export async function loadOptions(sql: Queryable, keys?: readonly string[]): Promise<Map<string, string>> {
  const rows = keys === undefined
    ? await sql<{ key: string; value: string }[]>`SELECT key, value FROM options`
    : await sql<{ key: string; value: string }[]>`SELECT key, value FROM options WHERE key IN ${sql([...keys])}`;
  return new Map(rows.map((r) => [r.key, r.value]));
}
