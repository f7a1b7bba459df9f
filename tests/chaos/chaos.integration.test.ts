// The chaos suite (tests/chaos/chaos-suite.ts): every fault of issue 15 on a stack of its own, each
// followed by the money audit. In `make test` it runs with the faults' durations scaled to a tenth
// (CHAOS_SCALE, default 0.1); `make chaos` runs it with the durations (CHAOS_SCALE=1). The
// report goes to .data/chaos/<time>/ (report.md, report.json, the services' logs). CHAOS_FAULTS=Postgres,SIGSTOP
// runs only the faults whose name contains one of the words.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../../infra/project-root.js';
import { runChaosSuite } from './chaos-suite.js';

const scale = Number(process.env.CHAOS_SCALE ?? '0.1');
// Per fault: its duration (at most 60 s × scale), restarts, recovery and the audit's drain.
const timeoutMs = 7 * (60_000 * scale + 60_000) + 120_000;

describe('chaos suite', () => {
  it('loses and doubles no money through every fault', async () => {
    const outDir = join(projectRoot(), '.data/chaos', new Date().toISOString().replace(/[:.]/g, '-'));
    const rows = await runChaosSuite({
      scale,
      redisPort: Number(process.env.CHAOS_REDIS_PORT ?? '6401'),
      concurrency: Number(process.env.CHAOS_CONCURRENCY ?? '8'),
      only: (process.env.CHAOS_FAULTS ?? '').split(',').filter(Boolean),
      outDir,
      log: (line) => process.stdout.write(`${line}\n`),
    });
    if (!process.env.CHAOS_FAULTS) expect(rows.length).toBe(7);
    for (const r of rows) {
      expect({ fault: r.fault, lost: r.lost, duplicated: r.duplicated, problems: r.problems }).toEqual({ fault: r.fault, lost: 0, duplicated: 0, problems: [] });
      expect(r.answered).toBeGreaterThan(0);
    }
  }, timeoutMs);
});
