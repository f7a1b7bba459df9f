// How a mock provider started from the command line stops: on SIGTERM or SIGINT (the first one; a
// second while closing is ignored), it logs its counters, closes, and exits 0, or 1 if closing failed.
import type { Logger } from '../../infra/logger.js';

export function closeOnSignal(name: string, log: Logger, server: { stats: unknown; close(): Promise<void> }): void {
  let closing = false;
  const shutdown = (signal: string): void => {
    if (closing) return;
    closing = true;
    log.info({ signal, stats: server.stats }, `${name} closing`);
    server.close().then(() => process.exit(0), (err: unknown) => {
      log.error({ err }, `${name} close failed`);
      process.exit(1);
    });
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}
