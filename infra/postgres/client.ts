import postgres from 'postgres';
import type { Config } from '../config.js';

export type Sql = postgres.Sql<Record<string, never>>;

// BIGINT columns come back as JS numbers: every quota fits well inside 2^53 (18 billion US dollars).
export function createSql(config: Config, overrides: { max?: number } = {}): Sql {
  return postgres(config.DATABASE_URL, {
    max: overrides.max ?? config.PG_POOL_MAX,
    idle_timeout: 30,
    onnotice: () => {},
    types: {
      bigint: { to: 20, from: [20], serialize: (x: number) => String(x), parse: (x: string) => Number(x) },
    },
  }) as unknown as Sql;
}
