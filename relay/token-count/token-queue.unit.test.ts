// The counting queue is bounded for prompt counts (refused at once with CountQueueFull past
// maxQueue), and never for delivered-text batches, which bill text already delivered.
import { afterAll, describe, expect, it } from 'vitest';
import { CountQueueFull, TokenCounter } from './token-counter.js';

const counter = new TokenCounter({ maxThreads: 1, maxQueue: 1 });
afterAll(() => counter.close());

describe('TokenCounter maxQueue', () => {
  it('runs one and queues one prompt count per thread, and refuses the rest at once', async () => {
    const big = Buffer.from(JSON.stringify({ messages: [{ role: 'user', content: 'word '.repeat(100_000) }] }));
    const results = await Promise.allSettled(Array.from({ length: 6 }, () => counter.countPrompt(big)));
    const ok = results.filter((r) => r.status === 'fulfilled');
    const refused = results.filter((r) => r.status === 'rejected');
    expect(ok.length).toBe(2);
    expect(refused.length).toBe(4);
    for (const r of refused) expect((r as PromiseRejectedResult).reason).toBeInstanceOf(CountQueueFull);
    // Room again once they are done.
    expect(await counter.countPrompt(big)).toBeGreaterThan(100_000);
  });

  it('never refuses delivered-text batches', async () => {
    const piece = Buffer.from('tok \n'.repeat(1000));
    const all = await Promise.all(Array.from({ length: 20 }, () => counter.countDeltas(piece, '', true)));
    expect(all.every((r) => r.count > 0)).toBe(true);
  });
});
