// A background job of the billing worker, run every `intervalMs`, never overlapping itself; a failed
// run is logged and the next one tries again.
import type { Logger } from '../infra/logger.js';

export function startPeriodicJob(name: string, intervalMs: number, log: Logger, run: () => Promise<unknown>): { stop(): void } {
  let running = false;
  const timer = setInterval(() => {
    if (running) return;
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
