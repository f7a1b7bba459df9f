import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Logger } from '../../infra/logger.js';
import { pendingIn, SettlementSpool, settlementLine } from './settlement-spool.js';

const log = { info: vi.fn(), warn: vi.fn(), error: vi.fn() } as unknown as Logger;
const s = (requestId: string, cost = 7) => ({ userId: 1, tokenId: 2, requestId, cost, eventJson: '{"a":"b\\n"}', tokens: 3, minute: 9 });
const dirs: string[] = [];
const dir = () => {
  const d = mkdtempSync(join(tmpdir(), 'spool-unit-'));
  dirs.push(d);
  return d;
};
const tick = () => new Promise((r) => setImmediate(r));

afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('pendingIn', () => {
  it('keeps the settlements without a done line, in order, and skips a torn line', () => {
    const text = `${settlementLine(s('a'))}${settlementLine(s('b'))}D a\n${settlementLine(s('c'))}${settlementLine(s('d')).slice(0, -8)}`;
    expect(pendingIn(text).map((x) => x.requestId)).toEqual(['b', 'c']);
    expect(pendingIn(text)[0]).toEqual(s('b'));
    expect(pendingIn(`${settlementLine(s('e')).slice(0, 20)}`)).toEqual([]);
  });

  it('writes the event as it was encoded, after the other fields, and reads older relays\' lines', () => {
    const line = settlementLine(s('a'));
    expect(line).toBe('S\t{"userId":1,"tokenId":2,"requestId":"a","cost":7,"tokens":3,"minute":9}\t{"a":"b\\n"}\n');
    const older = `S ${JSON.stringify(s('o'))}\nD q\n`;
    expect(pendingIn(older + line)).toEqual([s('o'), s('a')]);
  });
});

describe('SettlementSpool', () => {
  it('writes the settlements of a loop turn together at its end, then ends the answers that waited for them', async () => {
    const spool = SettlementSpool.open(dir(), log);
    const onDisk = () => pendingIn(readFileSync(spool.path, 'utf8')).map((x) => x.requestId);
    // Nothing waits to be written: an answer ends at once.
    let ended: string[] | null = null;
    spool.afterWritten(() => { ended = onDisk(); });
    expect(ended).toEqual([]);
    spool.add(s('a'));
    spool.add(s('b'));
    spool.add(s('c'));
    expect(onDisk()).toEqual([]);
    const seen: string[][] = [];
    spool.afterWritten(() => seen.push(onDisk()));
    spool.afterWritten(() => { throw new Error('the client left'); });
    spool.afterWritten(() => seen.push(onDisk()));
    expect(seen).toEqual([]);
    await tick();
    // Each answer ended with its settlement already on disk; one that failed did not stop the next.
    expect(seen).toEqual([['a', 'b', 'c'], ['a', 'b', 'c']]);
    expect(log.error).toHaveBeenCalledWith(expect.objectContaining({ err: expect.any(Error) }), expect.stringContaining('ending an answer'));
    // Done lines gate nothing: they go with the next settlement lines, after them.
    spool.done('a');
    spool.done('c');
    expect(spool.pendingCount).toBe(1);
    expect(onDisk()).toEqual(['a', 'b', 'c']);
    spool.add(s('d'));
    await tick();
    expect(onDisk()).toEqual(['b', 'd']);
    expect(readFileSync(spool.path, 'utf8').endsWith(`${settlementLine(s('d'))}D a\nD c\n`)).toBe(true);
    // With no settlement to go with, they go on their own shortly after.
    spool.done('b');
    await vi.waitFor(() => expect(onDisk()).toEqual(['d']), { timeout: 1000 });
    spool.done('d');
    spool.close(); // writes the last done line, then removes the file: nothing is pending
    expect(() => statSync(spool.path)).toThrow(/ENOENT/);
  });

  it('writes what is waiting when it closes, and ends the answers waiting for it', () => {
    const d = dir();
    const spool = SettlementSpool.open(d, log);
    spool.add(s('a'));
    let ended = false;
    spool.afterWritten(() => { ended = true; });
    spool.close();
    expect(ended).toBe(true);
    expect(pendingIn(readFileSync(spool.path, 'utf8')).map((x) => x.requestId)).toEqual(['a']);
  });

  it('takes over the file of a relay that is gone and replays it in order, stopping at a failure', async () => {
    const d = dir();
    writeFileSync(join(d, 'relay-4194305-00aa.spool'), [s('x'), s('y'), s('z')].map((x) => `S ${JSON.stringify(x)}\n`).join('') + 'D y\n');
    const spool = SettlementSpool.open(d, log);
    expect(spool.pendingCount).toBe(2);
    const seen: string[] = [];
    let fail = true;
    const settle = async (x: { requestId: string }) => {
      if (x.requestId === 'z' && fail) throw new Error('down');
      seen.push(x.requestId);
    };
    expect(await spool.replay(settle)).toBe(1);
    expect(spool.pendingCount).toBe(1);
    fail = false;
    expect(await spool.replay(settle)).toBe(1);
    expect(seen).toEqual(['x', 'z']);
    expect(spool.pendingCount).toBe(0);
    spool.close();
  });

  it('leaves a live relay\'s file alone', () => {
    const d = dir();
    const other = join(d, `relay-${process.ppid}-00bb.spool`);
    writeFileSync(other, `S ${JSON.stringify(s('q'))}\n`);
    const spool = SettlementSpool.open(d, log);
    expect(spool.pendingCount).toBe(0);
    expect(readFileSync(other, 'utf8')).toContain('"q"');
    spool.close();
  });

  it('takes over another host\'s file (a container sharing the volume, its relay maybe pid 1 too) only once it is stale, on its clock too', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    try {
      const d = dir();
      // Another host's relay with this process's own pid: the pid says nothing across hosts.
      const live = join(d, `relay-h0badc0de-${process.pid}-00cc.spool`);
      writeFileSync(live, `S ${JSON.stringify(s('live'))}\n`);
      const dead = join(d, 'relay-h0badc0de-1-00dd.spool');
      writeFileSync(dead, `S ${JSON.stringify(s('dead'))}\n`);
      const old = new Date(Date.now() - 120_000);
      utimesSync(dead, old, old);
      const spool = SettlementSpool.open(d, log);
      expect(spool.pendingCount).toBe(1);
      expect(readFileSync(live, 'utf8')).toContain('"live"');
      expect(existsSync(dead)).toBe(false);
      // Its own file is touched on the clock, and the other host's, once stale, is taken then.
      const own = readdirSync(d).find((n) => n.endsWith('.spool') && n !== 'relay-h0badc0de-' + process.pid + '-00cc.spool')!;
      utimesSync(join(d, own), old, old);
      utimesSync(live, old, old);
      vi.advanceTimersByTime(10_000);
      expect(Date.now() - statSync(join(d, own)).mtimeMs).toBeLessThan(5_000);
      expect(existsSync(live)).toBe(false);
      expect(spool.pendingCount).toBe(2);
      spool.close();
    } finally {
      vi.useRealTimers();
    }
  });

  it('empties its file once everything in it is done, and keeps the pending lines when it compacts', async () => {
    const spool = SettlementSpool.open(dir(), log);
    for (let i = 0; i < 400; i++) spool.add(s(`r${i}`));
    await tick();
    for (let i = 0; i < 400; i++) spool.done(`r${i}`);
    spool.add(s('next'));
    spool.done('next');
    await tick();
    expect(statSync(spool.path).size).toBeLessThan(64 * 1024);
    spool.add(s('kept'));
    const big = 'x'.repeat(4096);
    for (let i = 0; i < 1100; i++) {
      spool.add({ ...s(`b${i}`), eventJson: big });
      spool.done(`b${i}`);
      if (i % 10 === 9) await tick();
    }
    await tick();
    expect(statSync(spool.path).size).toBeLessThan(1024 * 1024);
    expect(pendingIn(readFileSync(spool.path, 'utf8')).map((x) => x.requestId)).toEqual(['kept']);
    spool.close();
  });
});

describe('SettlementSpool periodic replay', () => {
  it('replays stalled settlements on its interval while any is stalled, and stops with close', async () => {
    const spool = SettlementSpool.open(dir(), log);
    spool.add(s('a'));
    spool.add(s('b'));
    spool.stalled('a');
    expect(spool.stalledCount).toBe(1);
    const seen: string[] = [];
    let down = true;
    spool.replayEvery(20, async (x) => {
      seen.push(x.requestId);
      if (down) throw new Error('Command timed out');
    });
    // Redis still silent: each tick tries the first stalled one and keeps it.
    await vi.waitFor(() => expect(seen.length).toBeGreaterThanOrEqual(2), { timeout: 2000 });
    expect(spool.stalledCount).toBe(1);
    down = false;
    await vi.waitFor(() => expect(spool.stalledCount).toBe(0), { timeout: 2000 });
    // b was never given up: it is the settle retry's, not the replay's.
    expect(spool.pendingCount).toBe(1);
    expect(new Set(seen)).toEqual(new Set(['a']));
    spool.close();
    const after = seen.length;
    spool.stalled('b');
    await new Promise((r) => setTimeout(r, 100));
    expect(seen.length).toBe(after);
  });
});
