// The last-resort policy: an unhandled rejection is logged and counted and the relay keeps serving;
// an uncaught exception is logged as fatal, the relay stops accepting, drains, then exits 1.
import { describe, expect, it, vi } from 'vitest';
import type { Logger } from '../infra/logger.js';
import { processGuards } from './process-guards.js';

function deps(drainMs = 20) {
  const log = { error: vi.fn(), fatal: vi.fn(), warn: vi.fn(), info: vi.fn() } as unknown as Logger & { error: ReturnType<typeof vi.fn>; fatal: ReturnType<typeof vi.fn> };
  const order: string[] = [];
  return {
    log,
    order,
    metrics: { unhandledRejection: vi.fn() },
    stopAccepting: vi.fn(() => order.push('stopAccepting')),
    close: vi.fn(async () => { order.push('close'); }),
    exit: vi.fn((code: number) => order.push(`exit ${code}`)),
    drainMs,
  };
}

describe('process guards', () => {
  it('unhandledRejection: logs, counts, and neither stops accepting nor exits', async () => {
    const d = deps();
    processGuards(d).onUnhandledRejection(new Error('lost promise'));
    await new Promise((r) => setTimeout(r, 60));
    expect(d.log.error).toHaveBeenCalledOnce();
    expect(d.metrics.unhandledRejection).toHaveBeenCalledOnce();
    expect(d.stopAccepting).not.toHaveBeenCalled();
    expect(d.exit).not.toHaveBeenCalled();
  });

  it('uncaughtException: logs fatal, stops accepting at once, closes after the drain, exits 1, once', async () => {
    const d = deps();
    const g = processGuards(d);
    g.onUncaughtException(new Error('boom'));
    g.onUncaughtException(new Error('boom again'));
    expect(d.log.fatal).toHaveBeenCalledTimes(2);
    expect(d.order).toEqual(['stopAccepting']);
    await new Promise((r) => setTimeout(r, 80));
    expect(d.order).toEqual(['stopAccepting', 'close', 'exit 1']);
  });

  it('exits 1 even when closing hangs', async () => {
    const d = deps(10);
    d.close = vi.fn(() => new Promise<void>(() => {}));
    processGuards(d).onUncaughtException(new Error('boom'));
    await new Promise((r) => setTimeout(r, 2_100));
    expect(d.exit).toHaveBeenCalledWith(1);
  });
});
