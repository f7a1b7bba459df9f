// Releases reservations past their deadline: a relay that died mid-request must not hold an
// account's credit forever. Runs in the billing worker, the one process that is always there.
import type { Logger } from '../infra/logger.js';
import type { QuotaStore } from '../core/quota/quota-store.js';
import { startPeriodicJob } from './periodic-job.js';
import { encodeUsageEvent, LOG_TYPE } from '../core/usage/usage-event.js';

const BATCH = 100;

export function startReservationReaper(quota: QuotaStore, log: Logger, intervalMs: number): { stop(): void } {
  const reap = async () => {
    const now = Date.now();
    const released = await quota.releaseExpired(now, BATCH, (r) => encodeUsageEvent({
      v: 1,
      type: LOG_TYPE.error,
      // Its own request id: the relay's late settlement of the same request must still be billed.
      request_id: `${r.requestId}:expired`,
      upstream_request_id: '',
      user_id: r.userId,
      username: '',
      token_id: r.tokenId,
      token_name: '',
      token_limited: false,
      channel: 0,
      model_name: '',
      group: '',
      quota: 0,
      prompt_tokens: 0,
      completion_tokens: 0,
      is_stream: false,
      use_time_ms: 0,
      created_at: Math.floor(now / 1000),
      content: `reservation of ${r.amount} quota for request ${r.requestId} passed its deadline and was released`,
    }));
    if (released > 0) log.warn({ released }, 'released expired reservations');
  };
  return startPeriodicJob('reservation reaper', intervalMs, log, reap);
}
