import { describe, expect, it } from 'vitest';
import { latestReadWins } from './latest-reload.js';

/** A read whose result the test hands over when it chooses. */
function controlledReads() {
  const pending: Array<(v: string) => void> = [];
  return { read: () => new Promise<string>((resolve) => pending.push(resolve)), pending };
}

describe('latestReadWins', () => {
  it('drops a read that resolves after a later-begun read installed', async () => {
    const { read, pending } = controlledReads();
    const installed: string[] = [];
    const reload = latestReadWins(read, (v) => installed.push(v));
    const older = reload();
    const newer = reload();
    pending[1]!('new');
    await newer;
    pending[0]!('old');
    await older;
    expect(installed).toEqual(['new']);
  });

  it('installs reads that resolve in the order they began, and one after another', async () => {
    const { read, pending } = controlledReads();
    const installed: string[] = [];
    const reload = latestReadWins(read, (v) => installed.push(v));
    const a = reload();
    const b = reload();
    pending[0]!('a');
    await a;
    pending[1]!('b');
    await b;
    const c = reload();
    pending[2]!('c');
    await c;
    expect(installed).toEqual(['a', 'b', 'c']);
  });

  it('lets a failed read install nothing and the next one install', async () => {
    let fail = true;
    const installed: string[] = [];
    const reload = latestReadWins(async () => {
      if (fail) throw new Error('connection lost');
      return 'ok';
    }, (v) => installed.push(v));
    await expect(reload()).rejects.toThrow('connection lost');
    fail = false;
    await reload();
    expect(installed).toEqual(['ok']);
  });
});
