import { describe, expect, it } from 'vitest';
import { affinityOf, channelSeed, endUserOf, rendezvousScore } from './affinity.js';

interface C { id: number; weight: number }
function winner(affinity: number, channels: readonly C[]): number {
  let best = -1;
  let score = -1;
  for (const c of channels) {
    const s = rendezvousScore(affinity, channelSeed(c.id), c.weight);
    if (s > score) {
      score = s;
      best = c.id;
    }
  }
  return best;
}

const KEYS = Array.from({ length: 20_000 }, (_, i) => affinityOf(i + 1, undefined));

describe('rendezvous hashing', () => {
  it('gives one key the same channel every time', () => {
    const channels = [{ id: 1, weight: 1 }, { id: 2, weight: 1 }, { id: 3, weight: 1 }];
    const a = affinityOf(42, undefined);
    const first = winner(a, channels);
    for (let i = 0; i < 100; i++) expect(winner(affinityOf(42, undefined), channels)).toBe(first);
  });

  it('shares keys among channels in proportion to their weights', () => {
    const channels = [{ id: 11, weight: 3 }, { id: 12, weight: 1 }];
    const heavy = KEYS.filter((k) => winner(k, channels) === 11).length / KEYS.length;
    // 3:1 is 0.75; 20,000 keys put one standard deviation near 0.003.
    expect(heavy).toBeGreaterThan(0.73);
    expect(heavy).toBeLessThan(0.77);
  });

  it('a channel leaving moves only its own keys; one joining takes only its share', () => {
    const four = [1, 2, 3, 4].map((id) => ({ id, weight: 1 }));
    const three = four.filter((c) => c.id !== 3);
    let moved = 0;
    for (const k of KEYS) {
      const before = winner(k, four);
      const after = winner(k, three);
      if (before !== 3) expect(after).toBe(before);
      else moved++;
    }
    expect(moved / KEYS.length).toBeGreaterThan(0.22);
    expect(moved / KEYS.length).toBeLessThan(0.28);
    const five = [...four, { id: 5, weight: 1 }];
    let taken = 0;
    for (const k of KEYS) {
      const after = winner(k, five);
      if (after !== winner(k, four)) {
        expect(after).toBe(5);
        taken++;
      }
    }
    expect(taken / KEYS.length).toBeGreaterThan(0.17);
    expect(taken / KEYS.length).toBeLessThan(0.23);
  });

  it('spreads the end users of one key, each staying put', () => {
    const channels = [1, 2, 3, 4].map((id) => ({ id, weight: 1 }));
    const seen = new Set<number>();
    for (let u = 0; u < 200; u++) {
      const a = affinityOf(7, `user-${u}`);
      seen.add(winner(a, channels));
      expect(winner(affinityOf(7, `user-${u}`), channels)).toBe(winner(a, channels));
    }
    expect(seen.size).toBe(4);
  });
});

describe('endUserOf', () => {
  it('reads metadata.user_id when it is a non-empty string', () => {
    expect(endUserOf({ metadata: { user_id: 'u-1' } })).toBe('u-1');
    expect(endUserOf({ metadata: { user_id: '' } })).toBeUndefined();
    expect(endUserOf({ metadata: { user_id: 5 } })).toBeUndefined();
    expect(endUserOf({ metadata: null })).toBeUndefined();
    expect(endUserOf({})).toBeUndefined();
  });
});
