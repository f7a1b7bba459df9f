import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, renameSync, rmdirSync, rmSync, statSync, unlinkSync, utimesSync, writeFileSync } from 'node:fs';
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
      return true;
    };
    expect(await spool.replay(settle)).toBe(1);
    expect(spool.pendingCount).toBe(1);
    fail = false;
    expect(await spool.replay(settle)).toBe(1);
    expect(seen).toEqual(['x', 'z']);
    expect(spool.pendingCount).toBe(0);
    spool.close();
  });

  // Review faults: a relay of another gateway started from the same checkout (the same RELAY_SPOOL_DIR
  // and REDIS_PREFIX) took a killed relay's file and replayed it into its own Redis, where nothing
  // matched: the request (126 quota) was billed in neither database.
  it('takes over only the files of its own database, and those from before files named one', async () => {
    const d = dir();
    const gone = SettlementSpool.open(d, log, { database: 'database-b' });
    gone.add(s('b1'));
    gone.close(); // its relay gone with b1 pending
    const filesOfB = readdirSync(d);
    expect(filesOfB).toHaveLength(1);
    expect(filesOfB[0]).toMatch(/^relay-d[0-9a-f]{12}-h[0-9a-f]{8}-\d+-[0-9a-f]+\.spool$/);
    writeFileSync(join(d, 'relay-4194305-00ad.spool'), `S ${JSON.stringify(s('legacy'))}\n`);
    const replayed = async (sp: SettlementSpool) => {
      const ids: string[] = [];
      await sp.replay(async (x) => { ids.push(x.requestId); return true; });
      return ids;
    };
    const other = SettlementSpool.open(d, log, { database: 'database-a' });
    expect(await replayed(other)).toEqual(['legacy']);
    expect(existsSync(join(d, filesOfB[0]!))).toBe(true);
    const own = SettlementSpool.open(d, log, { database: 'database-b' });
    expect(await replayed(own)).toEqual(['b1']);
    expect(existsSync(join(d, filesOfB[0]!))).toBe(false);
    other.close();
    own.close();
  });

  // Before: counted "replayed" like the others, nothing said; on one Redis a settlement whose
  // reservation went with Redis's data is a request served without a debit.
  it('says which replayed settlements found no reservation', async () => {
    const d = dir();
    writeFileSync(join(d, 'relay-4194305-00ab.spool'), [s('m'), s('n')].map((x) => `S ${JSON.stringify(x)}\n`).join(''));
    const warn = vi.fn();
    const spool = SettlementSpool.open(d, { ...log, warn } as unknown as Logger);
    expect(await spool.replay(async (x) => x.requestId !== 'n')).toBe(2);
    expect(warn).toHaveBeenCalledWith({ count: 1, requestIds: ['n'] }, expect.stringContaining('found no reservation'));
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

  it('takes over another host\'s file only once it saw it unchanged for the staleness period itself, whatever its mtime says', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    try {
      const d = dir();
      // Another host's relay with this process's own pid: the pid says nothing across hosts.
      const live = join(d, `relay-h0badc0de-${process.pid}-00cc.spool`);
      writeFileSync(live, `S ${JSON.stringify(s('live'))}\n`);
      const dead = join(d, 'relay-h0badc0de-1-00dd.spool');
      writeFileSync(dead, `S ${JSON.stringify(s('dead'))}\n`);
      // The live relay's clock runs 70 s behind this one's: its touches date its file in the past.
      const behind = Date.now() - 70_000;
      utimesSync(live, new Date(behind), new Date(behind));
      const old = new Date(Date.now() - 120_000);
      utimesSync(dead, old, old);
      let clock = 1_000_000;
      const spool = SettlementSpool.open(d, log, { now: () => clock });
      // Seen for the first time: a relay just started cannot tell a live file from a dead one yet.
      expect(spool.pendingCount).toBe(0);
      const own = readdirSync(d).find((n) => n.endsWith('.spool') && n !== 'relay-h0badc0de-' + process.pid + '-00cc.spool' && n !== 'relay-h0badc0de-1-00dd.spool')!;
      utimesSync(join(d, own), old, old);
      for (let i = 1; i <= 12; i++) {
        clock += 10_000;
        const touched = new Date(behind + i * 10_000);
        utimesSync(live, touched, touched);
        vi.advanceTimersByTime(10_000);
        // Its own file is touched on the clock.
        expect(Date.now() - statSync(join(d, own)).mtimeMs).toBeLessThan(5_000);
        // The file touched all along is never taken; the other once unchanged for 60 s of this relay's watch.
        expect(readFileSync(live, 'utf8'), `tick ${i}`).toContain('"live"');
        expect(existsSync(dead), `tick ${i}`).toBe(i < 6);
        expect(spool.pendingCount).toBe(i < 6 ? 0 : 1);
      }
      spool.close();
    } finally {
      vi.useRealTimers();
    }
  });

  it('writes its pending settlements to a new file when another relay took its file over, so that none is lost', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    try {
      const d = dir();
      const spool = SettlementSpool.open(d, log);
      const onDisk = () => pendingIn(readFileSync(spool.path, 'utf8')).map((x) => x.requestId);
      spool.add(s('a'));
      spool.add(s('b'));
      await tick();
      spool.done('a');
      // A relay of another host takes it for a dead one's: renamed away, then read and removed.
      const claimed = join(d, 'relay-h0badc0de-1-00ee.claimed');
      renameSync(spool.path, claimed);
      // Written meanwhile into the file it took, after it read it.
      spool.add(s('c'));
      await tick();
      vi.advanceTimersByTime(10_000);
      expect(onDisk()).toEqual(['b', 'c']);
      expect(log.warn).toHaveBeenCalledWith(expect.objectContaining({ pending: 2 }), expect.stringContaining('taken over'));
      unlinkSync(claimed);
      // And again, the file removed at once: what follows goes to the new file.
      const fd = openSync(spool.path, 'r');
      unlinkSync(spool.path);
      closeSync(fd);
      spool.add(s('d'));
      await tick();
      vi.advanceTimersByTime(10_000);
      spool.add(s('e'));
      await tick();
      expect(onDisk()).toEqual(['b', 'c', 'd', 'e']);
      spool.close();
      expect(pendingIn(readFileSync(spool.path, 'utf8')).map((x) => x.requestId)).toEqual(['b', 'c', 'd', 'e']);
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

describe('SettlementSpool compaction', () => {
  it('survives a compaction the disk refuses, keeping every pending line, and compacts once it can', async () => {
    let clock = 0;
    const spool = SettlementSpool.open(dir(), log, { now: () => clock });
    const pending = () => pendingIn(readFileSync(spool.path, 'utf8')).map((x) => x.requestId);
    // The file it is rewritten into cannot be created (EISDIR here; ENOSPC, EIO or EROFS on a bad disk).
    const tmp = `${spool.path}.tmp`;
    mkdirSync(tmp);
    vi.mocked(log.error).mockClear();
    spool.add(s('kept'));
    const big = 'x'.repeat(4096);
    const fill = async (from: number) => {
      for (let i = from; i < from + 1100; i++) {
        spool.add({ ...s(`b${i}`), eventJson: big });
        spool.done(`b${i}`);
        if (i % 10 === 9) await tick();
      }
      spool.add(s(`p${from}`));
      await tick();
    };
    // An exception here would be uncaught (it runs in setImmediate): the relay's process guard exits.
    await fill(0);
    expect(log.error).toHaveBeenCalledWith(expect.objectContaining({ err: expect.objectContaining({ code: 'EISDIR' }) }), expect.stringContaining('compaction failed'));
    expect(statSync(spool.path).size).toBeGreaterThan(4 * 1024 * 1024);
    expect(pending()).toEqual(['kept', 'p0']);
    // Not tried again on every turn meanwhile, and the file goes on taking lines.
    const errors = vi.mocked(log.error).mock.calls.length;
    await fill(2000);
    expect(vi.mocked(log.error).mock.calls.length).toBe(errors);
    expect(pending()).toEqual(['kept', 'p0', 'p2000']);
    // The obstacle gone, a later compaction goes through.
    rmdirSync(tmp);
    clock += 60_000;
    spool.add(s('last'));
    spool.done('p0');
    await tick();
    expect(statSync(spool.path).size).toBeLessThan(1024 * 1024);
    expect(pending()).toEqual(['kept', 'p2000', 'last']);
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
      return true;
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
