// The Redis round-trip floor of the bench report, against the real Redis: paced as asked, one PING
// per round trip, and the server's CPU over them read from INFO.
import { describe, expect, it } from 'vitest';
import { testConfig } from '../../infra/testing/test-config.js';
import { measureRedisRoundTripFloor } from './redis-floor.js';

describe('measureRedisRoundTripFloor', () => {
  it('paces one PING per interval and reports the server CPU per PING', async () => {
    const t0 = performance.now();
    const floor = await measureRedisRoundTripFloor(testConfig().REDIS_URL, 1000, 300);
    const elapsed = performance.now() - t0;
    expect(floor).not.toBeNull();
    expect(floor!.rate).toBe(1000);
    // Paced, not flat out: about rate × duration PINGs, never more than the elapsed time allows.
    expect(floor!.pings).toBeLessThanOrEqual(Math.ceil(elapsed) + 1);
    expect(floor!.pings).toBeGreaterThan(30);
    expect(floor!.cpuUsPerRoundTrip).toBeGreaterThan(0);
    expect(Number.isFinite(floor!.cpuUsPerRoundTrip)).toBe(true);
  });

  it('answers null when Redis cannot be reached', async () => {
    expect(await measureRedisRoundTripFloor('redis://127.0.0.1:1', 1000, 100)).toBeNull();
  });
});
