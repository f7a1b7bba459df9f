import { describe, expect, it } from 'vitest';
import { HELD_BACK, LogThrottle } from './log-throttle.js';

describe('LogThrottle', () => {
  it('lets one line of a key out per interval, the next saying how many were held back', () => {
    const t = new LogThrottle(10_000);
    expect(t.take('above-bound:1', 0)).toBe(0);
    expect(t.take('above-bound:1', 1)).toBe(HELD_BACK);
    expect(t.take('above-bound:1', 9_999)).toBe(HELD_BACK);
    expect(t.take('above-bound:1', 10_000)).toBe(2);
    expect(t.take('above-bound:1', 10_001)).toBe(HELD_BACK);
    expect(t.take('above-bound:1', 30_000)).toBe(1);
    expect(t.take('above-bound:1', 50_000)).toBe(0);
  });

  it('keeps each key apart', () => {
    const t = new LogThrottle(1_000);
    expect(t.take('a', 0)).toBe(0);
    expect(t.take('b', 0)).toBe(0);
    expect(t.take('a', 1)).toBe(HELD_BACK);
    expect(t.take('b', 1)).toBe(HELD_BACK);
  });

  it('lets every line out with an interval of 0', () => {
    const t = new LogThrottle(0);
    for (let i = 0; i < 5; i++) expect(t.take('a', i)).toBe(0);
  });

  it('starts over past its most keys: a line too many goes out, never one too few', () => {
    const t = new LogThrottle(1_000, 2);
    expect(t.take('a', 0)).toBe(0);
    expect(t.take('b', 0)).toBe(0);
    expect(t.take('c', 0)).toBe(0);
    expect(t.take('a', 1)).toBe(0);
    expect(t.take('a', 2)).toBe(HELD_BACK);
  });
});
