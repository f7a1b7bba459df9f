// The heartbeat's stall check: a provider stream that completes no line for the stall limit is cut at
// the next beat (undici's body timeout restarts with every byte, so a trickle never ends otherwise).
import { describe, expect, it, vi } from 'vitest';
import type { Logger } from '../../infra/logger.js';
import { ReservationHeartbeat } from './reservation-heartbeat.js';

describe('ReservationHeartbeat', () => {
  it('cuts a stream silent past the stall limit, and renews every deadline it holds', async () => {
    const renewed: string[][] = [];
    const quota = { renewDeadlines: async (held: readonly { requestId: string }[]) => { renewed.push(held.map((h) => h.requestId)); } };
    const log = { warn: vi.fn() } as unknown as Logger;
    const beat = new ReservationHeartbeat(quota, 900_000, log, 20);
    try {
      const cut = { stalled: vi.fn(), fresh: vi.fn(), waiting: vi.fn() };
      beat.hold({ requestId: 'stalled', record: { userId: 1 }, streamLineAt: performance.now(), cutStalledStream: cut.stalled });
      await new Promise((r) => setTimeout(r, 60));
      beat.hold({ requestId: 'fresh', record: { userId: 1 }, streamLineAt: performance.now(), cutStalledStream: cut.fresh });
      // Not streaming yet (0): waiting for the provider's headers is the headers timeout's business.
      beat.hold({ requestId: 'waiting', record: { userId: 1 }, streamLineAt: 0, cutStalledStream: cut.waiting });
      await beat.beat();
      expect([cut.stalled.mock.calls.length, cut.fresh.mock.calls.length, cut.waiting.mock.calls.length]).toEqual([1, 0, 0]);
      expect(renewed).toEqual([['stalled', 'fresh', 'waiting']]);
    } finally {
      beat.stop();
    }
  });
});
