// How many test files run at once, for vitest.config.ts (maxWorkers) and the global setup, which
// migrates a pair of databases for each worker (test-config.ts testDatabases). No imports: the vitest
// config loads it.

/** At least two (vitest's own default, cores - 1, is one on 2 cores), unless VITEST_MAX_WORKERS says otherwise. */
export function testWorkers(cores: number): number {
  const asked = Number(process.env.VITEST_MAX_WORKERS);
  return Number.isInteger(asked) && asked > 0 ? asked : Math.max(2, cores - 1);
}
