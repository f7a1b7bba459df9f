// What one round trip costs Redis, whatever the command: PING after PING at a paced rate, each alone
// on the wire, and the server's CPU (INFO cpu) over them. A relay makes at least one round trip per
// request (its reservation gates the forward), so at a given rate this is the floor under the
// report's "Redis CPU per request" that no change to the scripts can go below; coalescing round
// trips (several requests' commands in one write) or no round trip per request (credit held by the
// relay) can (docs/performance.md).
import { Redis } from 'ioredis';
import { redisSnapshot } from './runtime-figures.js';

export interface RedisRoundTripFloor {
  rate: number;
  pings: number;
  /** Redis CPU (user + system) per PING, µs. */
  cpuUsPerRoundTrip: number;
}

/** Paces PINGs at `rate` a second for `durationMs` on a connection of its own (no auto-pipelining). */
export async function measureRedisRoundTripFloor(redisUrl: string, rate: number, durationMs: number): Promise<RedisRoundTripFloor | null> {
  const redis = new Redis(redisUrl, { enableAutoPipelining: false, lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await redis.connect();
    await redis.ping();
    const before = await redisSnapshot(redis);
    const intervalMs = 1000 / rate;
    const t0 = performance.now();
    let pings = 0;
    while (performance.now() - t0 < durationMs) {
      await redis.ping();
      pings++;
      // setImmediate, not a timer: timers cannot pace below a millisecond.
      const next = t0 + pings * intervalMs;
      while (performance.now() < next) await new Promise((r) => setImmediate(r));
    }
    const after = await redisSnapshot(redis);
    if (!before || !after || pings === 0) return null;
    // The two INFO calls of the snapshot after are in `after`; their cost is within the noise of thousands of PINGs.
    return { rate, pings, cpuUsPerRoundTrip: ((after.cpuSec - before.cpuSec) * 1e6) / pings };
  } catch {
    return null;
  } finally {
    redis.disconnect();
  }
}
