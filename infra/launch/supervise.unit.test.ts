// The local stack's supervisor (supervise.ts) on real child processes: a child that fails is started
// again, one that exits cleanly is not, a stop reaches the child and its own shutdown, and the delay
// grows while the failures come in a row.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CONFIG_ERROR_EXIT_CODE } from '../config.js';
import { GIVE_UP_AFTER, restartDelay, RESTART_MAX_MS, RESTART_MIN_MS, supervise } from './supervise.js';

const dir = mkdtempSync(join(tmpdir(), 'supervise-'));

/** A child script: counts its starts in a file, then does what `behaviour` says by its start number. */
function script(name: string, behaviour: string): { path: string; starts: () => number } {
  const counter = join(dir, `${name}.count`);
  writeFileSync(counter, '0');
  const path = join(dir, `${name}.cjs`);
  writeFileSync(path, `
    const fs = require('node:fs');
    const n = Number(fs.readFileSync(${JSON.stringify(counter)}, 'utf8')) + 1;
    fs.writeFileSync(${JSON.stringify(counter)}, String(n));
    ${behaviour}
  `);
  return { path, starts: () => Number(readFileSync(counter, 'utf8')) };
}

describe('supervise', () => {
  it('starts a child that exits with an error again, and ends with it when it exits cleanly', async () => {
    // Fails twice (an exception, then a kill by a signal nobody sent), then exits 0.
    const child = script('flaky', `if (n === 1) throw new Error('boom'); if (n === 2) process.kill(process.pid, 'SIGKILL'); process.exit(0);`);
    const lines: string[] = [];
    const s = supervise({ name: 'flaky', command: process.execPath, args: [child.path], log: (l) => lines.push(l) });
    expect(await s.ended).toBe(0);
    expect(child.starts()).toBe(3);
    expect(s.restarts).toBe(2);
    expect(lines.join('\n')).toMatch(/flaky exited \(code 1\); starting it again in 500 ms/);
    expect(lines.join('\n')).toMatch(/flaky exited \(signal SIGKILL\); starting it again in 1000 ms/);
    expect(lines.at(-1)).toMatch(/exited cleanly; not restarted/);
  });

  it('passes SIGTERM to the child, whose shutdown runs, and is not started again', async () => {
    const stopped = join(dir, 'stopped');
    const child = script('server', `
      process.on('SIGTERM', () => { fs.writeFileSync(${JSON.stringify(stopped)}, 'graceful'); process.exit(0); });
      setInterval(() => {}, 1000);
      process.send?.('up');
    `);
    const s = supervise({ name: 'server', command: process.execPath, args: [child.path], log: () => {} });
    while (child.starts() === 0) await new Promise((r) => setTimeout(r, 20));
    await new Promise((r) => setTimeout(r, 100));
    s.stop();
    expect(await s.ended).toBe(0);
    expect(readFileSync(stopped, 'utf8')).toBe('graceful');
    expect(s.restarts).toBe(0);
    expect(s.child).toBeNull();
  });

  it('a stop while waiting to start again ends at once, starting nothing', async () => {
    const child = script('dead', `process.exit(3);`);
    const s = supervise({ name: 'dead', command: process.execPath, args: [child.path], log: () => {} });
    while (s.restarts === 0) await new Promise((r) => setTimeout(r, 20));
    s.stop();
    expect(await s.ended).toBe(0);
    await new Promise((r) => setTimeout(r, RESTART_MIN_MS + 200));
    expect(child.starts()).toBe(1);
  });

  it('gives up after GIVE_UP_AFTER failures in a row, ending with the child\'s code', async () => {
    const child = script('broken', `process.exit(7);`);
    const lines: string[] = [];
    const s = supervise({ name: 'broken', command: process.execPath, args: [child.path], log: (l) => lines.push(l) });
    expect(await s.ended).toBe(7);
    expect(child.starts()).toBe(GIVE_UP_AFTER);
    expect(lines.at(-1)).toMatch(new RegExp(`${GIVE_UP_AFTER} failures in a row; left down`));
  }, 30_000);

  it('leaves a child that stopped on its configuration (exit 78) down at once, ending with that code', async () => {
    // Before, a refused RELAY_PORT was started again 5 times over ~15 s (make run reported the
    // embedded ClickHouse "did not start" after 20 s).
    expect(CONFIG_ERROR_EXIT_CODE).toBe(78);
    const child = script('misconfigured', `process.stderr.write('x: invalid configuration: RELAY_PORT: …\\n'); process.exit(78);`);
    const lines: string[] = [];
    const s = supervise({ name: 'misconfigured', command: process.execPath, args: [child.path], log: (l) => lines.push(l) });
    const started = Date.now();
    expect(await s.ended).toBe(78);
    expect(Date.now() - started).toBeLessThan(RESTART_MIN_MS + 2_000);
    expect(child.starts()).toBe(1);
    expect(s.restarts).toBe(0);
    expect(lines).toEqual(['supervise: misconfigured exited on its configuration (code 78); not restarted: fix the variables it names above']);
  }, 20_000);

  it('doubles the delay while failures come in a row, up to its bound', () => {
    expect([1, 2, 3, 4].map(restartDelay)).toEqual([RESTART_MIN_MS, RESTART_MIN_MS * 2, RESTART_MIN_MS * 4, RESTART_MIN_MS * 8]);
    expect(restartDelay(40)).toBe(RESTART_MAX_MS);
  });
});
