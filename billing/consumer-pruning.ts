// A billing worker's consumer name is its host and pid (BILLING_CONSUMER), so every restart leaves the
// old name in the stream's consumer group for good: an operator's XINFO CONSUMERS listed a dead
// worker per restart. A consumer that holds no pending entry and has been idle CONSUMER_IDLE_MS is
// gone and owes nothing (entries it had read are claimed by the live workers after
// BILLING_CLAIM_IDLE_MS, and are then pending at them), so it is removed, check and removal in one
// script (pruneIdleConsumers-1.lua). A quiet live worker removed all the same is added again by its
// next XREADGROUP.
import type { Logger } from '../infra/logger.js';
import type { UsageScripts } from './usage-scripts.js';

/** How long a consumer has been idle before it counts as gone. */
export const CONSUMER_IDLE_MS = 10 * 60_000;
/** How often a worker looks, per stream. */
export const PRUNE_INTERVAL_MS = 60_000;

/** Prunes each stream at most once per PRUNE_INTERVAL_MS, off the worker's loop; a failure is logged and waits for the next turn. */
export class ConsumerPruner {
  readonly #last = new Map<string, number>();
  readonly #scripts: Pick<UsageScripts, 'pruneIdleConsumers'>;
  readonly #group: string;
  readonly #self: string;
  readonly #log: Pick<Logger, 'info' | 'warn'>;

  constructor(scripts: Pick<UsageScripts, 'pruneIdleConsumers'>, group: string, self: string, log: Pick<Logger, 'info' | 'warn'>) {
    this.#scripts = scripts;
    this.#group = group;
    this.#self = self;
    this.#log = log;
  }

  maybePrune(stream: string, now = Date.now()): void {
    if (now - (this.#last.get(stream) ?? 0) < PRUNE_INTERVAL_MS) return;
    this.#last.set(stream, now);
    this.#scripts.pruneIdleConsumers(stream, this.#group, this.#self, CONSUMER_IDLE_MS).then(
      (removed) => { if (removed.length > 0) this.#log.info({ stream, removed }, 'removed billing consumers idle for 10 minutes with nothing pending'); },
      (err: unknown) => this.#log.warn({ stream, err: (err as Error).message }, 'could not prune idle billing consumers'),
    );
  }
}
