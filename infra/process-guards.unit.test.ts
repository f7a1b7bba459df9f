// The shared last-resort policy (the relay's, the billing worker's and the console-api's): an
// unhandled rejection is logged and counted and the process keeps running; an uncaught exception is
// logged as fatal, the process stops taking work, drains, closes and exits 1, even when closing hangs
// or throws.
import { describe, expect, it, vi } from 'vitest';
import { CONFIG_ERROR_EXIT_CODE, ConfigError } from './config.js';
import { processGuards } from './process-guards.js';

function deps(drainMs = 20, closeMs = 50) {
  const order: string[] = [];
  return {
    log: { error: vi.fn(), fatal: vi.fn() },
    order,
    countUnhandledRejection: vi.fn(),
    stopAccepting: vi.fn(() => void order.push('stopAccepting')),
    close: vi.fn(async () => void order.push('close')),
    exit: vi.fn((code: number) => void order.push(`exit ${code}`)),
    drainMs,
    closeMs,
  };
}

const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('process guards (infra)', () => {
  it('unhandledRejection: logs with its count, counts, neither stops nor exits', async () => {
    const d = deps();
    const g = processGuards({ ...d, messages: { unhandledRejection: 'still billing' } });
    g.onUnhandledRejection(new Error('lost promise'));
    g.onUnhandledRejection(new Error('another'));
    await wait(100);
    expect(g.unhandledRejections).toBe(2);
    expect(d.countUnhandledRejection).toHaveBeenCalledTimes(2);
    expect(d.log.error).toHaveBeenLastCalledWith({ err: new Error('another'), unhandledRejections: 2 }, 'still billing');
    expect(d.stopAccepting).not.toHaveBeenCalled();
    expect(d.exit).not.toHaveBeenCalled();
  });

  it('unhandledRejection: a metric that throws is not an uncaught exception', () => {
    const d = deps();
    d.countUnhandledRejection.mockImplementation(() => { throw new Error('metric'); });
    expect(() => processGuards(d).onUnhandledRejection('x')).not.toThrow();
    expect(d.log.error).toHaveBeenCalledOnce();
  });

  it('uncaughtException: logs fatal, stops at once, closes after the drain, exits 1, once', async () => {
    const d = deps();
    const g = processGuards(d);
    g.onUncaughtException(new Error('boom'));
    g.onUncaughtException(new Error('boom again'));
    expect(d.log.fatal).toHaveBeenCalledTimes(2);
    expect(d.order).toEqual(['stopAccepting']);
    await wait(100);
    expect(d.order).toEqual(['stopAccepting', 'close', 'exit 1']);
  });

  it('exits 1 when closing hangs, throws or rejects', async () => {
    for (const close of [() => new Promise<void>(() => {}), () => { throw new Error('sync'); }, () => Promise.reject(new Error('async'))]) {
      const d = deps(5, 30);
      processGuards({ ...d, close: close as () => Promise<void> }).onUncaughtException(new Error('boom'));
      await wait(120);
      expect(d.exit).toHaveBeenCalledWith(1);
    }
  });

  // Before: exit 1, and the supervisor started it again 6 times to fail the same way.
  it('uncaughtException of a ConfigError (a setting a server refused): drains, closes and exits 78, not restarted', async () => {
    const d = deps();
    const g = processGuards(d);
    g.onUncaughtException(new ConfigError([{ name: 'REDIS_URL', problem: 'the Redis server refused database 99', value: 'redis://127.0.0.1:6379/99' }]));
    await wait(150);
    expect(d.order).toEqual(['stopAccepting', 'close', `exit ${CONFIG_ERROR_EXIT_CODE}`]);
    expect(CONFIG_ERROR_EXIT_CODE).toBe(78);
    expect(d.log.fatal.mock.calls[0]![1]).toMatch(/invalid configuration/);
  });
});
