// The spool's writes when write(2) takes only part of what it is given (a disk filling up, a signal):
// a line cut short is unreadable, and so is the next one, written on after it.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Logger } from '../../infra/logger.js';
import { pendingIn, SettlementSpool } from './settlement-spool.js';

const disk = vi.hoisted(() => ({ short: 0, fail: 0 }));
vi.mock('node:fs', async (importOriginal) => {
  const fs = await importOriginal<typeof import('node:fs')>();
  // Each of the next `short` writes takes half of what it is given; each of the `fail` after them
  // takes half and then the disk is full.
  const writeSync = ((fd: number, data: string | NodeJS.ArrayBufferView, ...rest: unknown[]) => {
    if (disk.short + disk.fail > 0) {
      const buf = typeof data === 'string' ? Buffer.from(data) : Buffer.from(data.buffer, data.byteOffset, data.byteLength);
      const from = typeof data === 'string' ? 0 : (rest[0] as number | undefined) ?? 0;
      const length = typeof data === 'string' ? buf.length : (rest[1] as number | undefined) ?? buf.length - from;
      if (length > 1) {
        const half = Math.floor(length / 2);
        if (disk.short > 0) {
          disk.short--;
          return fs.writeSync(fd, buf, from, half);
        }
        disk.fail--;
        fs.writeSync(fd, buf, from, half);
        throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
      }
    }
    return (fs.writeSync as (...a: unknown[]) => number)(fd, data, ...rest);
  }) as typeof fs.writeSync;
  return { ...fs, default: { ...fs, writeSync }, writeSync };
});

const log = { info: vi.fn(), warn: vi.fn(), error: vi.fn() } as unknown as Logger;
const s = (requestId: string) => ({ userId: 1, tokenId: 2, requestId, cost: 7, eventJson: '{"content":"é ✓ 😀"}', tokens: 3, minute: 9 });
const dirs: string[] = [];
const tick = () => new Promise((r) => setImmediate(r));

afterEach(() => {
  disk.short = 0;
  disk.fail = 0;
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('SettlementSpool writes', () => {
  it('writes on from where a short write stopped, and ends a line a failed write tore before writing the next', async () => {
    const d = mkdtempSync(join(tmpdir(), 'spool-writes-'));
    dirs.push(d);
    const spool = SettlementSpool.open(d, log);
    const onDisk = () => pendingIn(readFileSync(spool.path, 'utf8')).map((x) => x.requestId);
    disk.short = 3;
    spool.add(s('a'));
    spool.add(s('b'));
    await tick();
    expect(disk.short).toBe(0);
    expect(onDisk()).toEqual(['a', 'b']);
    // Half a line on disk, then the disk is full: that settlement goes on from memory, and the next
    // write must not be glued to the torn half.
    disk.fail = 1;
    spool.add(s('c'));
    await tick();
    expect(log.error).toHaveBeenCalledWith(expect.objectContaining({ err: expect.objectContaining({ code: 'ENOSPC' }) }), expect.stringContaining('write failed'));
    spool.add(s('d'));
    await tick();
    expect(onDisk()).toEqual(['a', 'b', 'd']);
    spool.close();
  });
});
