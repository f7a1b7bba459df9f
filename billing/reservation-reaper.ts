// Releases reservations past their deadline: a relay that died mid-request must not hold an
// account's credit forever. Runs in the billing worker, the one process that is always there.
import type { Logger } from '../infra/logger.js';
import type { QuotaStore } from '../core/quota/quota-store.js';
import { startPeriodicJob } from './periodic-job.js';
import { encodeUsageEvent, LOG_TYPE, usageEvent } from '../core/usage/usage-event.js';

const BATCH = 100;

export function startReservationReaper(quota: QuotaStore, log: Logger, intervalMs: number, runsWhen?: () => boolean): { stop(): void } {
  const reap = async () => {
    // Redis's clock (the quota store's RedisClock), the one the relays date the deadlines with; not
    // before it was read once (a worker started while Redis was down): this host's clock, far off
    // Redis's, would reap live reservations.
    if (!quota.clock.settled) return;
    const now = quota.clock.now();
    const released = await quota.releaseExpired(now, BATCH, (r) => encodeUsageEvent(usageEvent({
      type: LOG_TYPE.error,
      // Its own request id: the relay's late settlement of the same request must still be billed.
      request_id: `${r.requestId}:expired`,
      user_id: r.userId,
      token_id: r.tokenId,
      created_at: Math.floor(now / 1000),
      content: `reservation of ${r.amount} quota for request ${r.requestId} passed its deadline and was released`,
    })));
    if (released > 0) log.warn({ released }, 'released expired reservations');
  };
  return startPeriodicJob('reservation reaper', intervalMs, log, reap, runsWhen);
}
