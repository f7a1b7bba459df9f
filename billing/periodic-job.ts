// A background job of the billing worker, run every `intervalMs`, never overlapping itself; a failed
// run is logged and the next one tries again. `runsWhen` false skips a turn (a job that writes to
// Redis, while the Redis is not known to hold this database's accounts).
import type { Logger } from '../infra/logger.js';

export function startPeriodicJob(name: string, intervalMs: number, log: Logger, run: () => Promise<unknown>, runsWhen: () => boolean = always): { stop(): void } {
  let running = false;
  const timer = setInterval(() => {
    if (running || !runsWhen()) return;
    running = true;
    run()
      .catch((err: unknown) => log.error({ err }, `${name} failed`))
      .finally(() => {
        running = false;
      });
  }, intervalMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}

const always = (): boolean => true;

/**
 * Runs `step` (one statement over at most `batchSize` rows, answering how many it took) until a batch
 * is short or `maxBatches` ran, and answers the total: a pruning pass that never holds a long lock.
 */
export async function inBatches(batchSize: number, maxBatches: number, step: () => Promise<number>): Promise<number> {
  let total = 0;
  for (let i = 0; i < maxBatches; i++) {
    const n = await step();
    total += n;
    if (n < batchSize) break;
  }
  return total;
}
