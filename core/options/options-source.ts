import type { Sql } from '../../infra/postgres/client.js';

/** The options table as a map; read at start and again whenever the console announces a change. */
export async function loadOptions(sql: Sql): Promise<Map<string, string>> {
  const rows = await sql`SELECT key, value FROM options`;
  return new Map((rows as unknown as { key: string; value: string }[]).map((r) => [r.key, r.value]));
}
