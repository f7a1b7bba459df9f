// Channel health on the relay side: what each provider attempt came to, counted per channel across
// the fleet, and a channel disabled automatically (status 3) once its faults cross a threshold.
//
// Where the state lives, and why:
// - The counts are shared by every relay, in Redis (recordChannelOutcome-2.lua, keys built in
//   infra/redis/keys.ts under the channel's hash tag): a channel failing on ten relays is one channel
//   failing, and one relay alone may see too few of its requests to judge.
// - A fault is recorded when it happens: one script call on the failure path, not awaited by the
//   request (which goes on to the next channel meanwhile).
// - A success costs nothing but a local increment; each relay reports its successes per channel every
//   CHANNEL_HEALTH_FLUSH_MS in one call per channel used (flush()), and with its next fault of that
//   channel, scored before it (faulted()). The success path gets no Redis round trip. The price:
//   another relay's successes reach the counts up to a flush late; left to the flush, this relay's own
//   disabled a channel that served four requests in five (its faults of one flush taken for
//   consecutive, its attempts counted without the successes).
// - The decision is the script's (atomic: two relays recording at once cannot both miss the
//   threshold); the status change is Postgres's (core/channels/channel-status.ts: only from status 1,
//   so of several relays tripping together exactly one gets the row and announces it). It then
//   publishes the channel invalidation: every relay, this one included, reloads its routes without it.
// - Probing and re-enabling are not the relay's: the console's prober does them, once per fleet
//   (console-api/channels/channel-prober.ts), and sends the operator webhook.
import type { Logger } from '../../infra/logger.js';
import type { Sql } from '../../infra/postgres/client.js';
import type { Redis } from '../../infra/redis/client.js';
import type { RedisKeys } from '../../infra/redis/keys.js';
import { disableAutomatically } from '../../core/channels/channel-status.js';
import type { ChannelMetrics } from '../metrics/channel-metrics.js';
import type { Channel } from './channel-registry.js';
import { recordChannelOutcomeScript, type RecordOutcomeFn } from './health-scripts.js';

export interface ChannelHealthSettings {
  /** Consecutive channel faults that disable a channel; 0: rule off. */
  faultsToDisable: number;
  /** Fault rate over the window that disables a channel, 0..1; 0: rule off. */
  faultRateToDisable: number;
  windowMs: number;
  /** Fewest attempts in the window before the rate rule applies. */
  minAttempts: number;
  /** How often successes are reported. */
  flushMs: number;
  /** First probe of a disabled channel, this long after it was disabled. */
  firstProbeSec: number;
}

export function healthSettingsFromConfig(c: {
  CHANNEL_FAULTS_TO_DISABLE: number; CHANNEL_FAULT_RATE_TO_DISABLE: number; CHANNEL_FAULT_WINDOW_SEC: number;
  CHANNEL_FAULT_RATE_MIN_ATTEMPTS: number; CHANNEL_HEALTH_FLUSH_MS: number; CHANNEL_PROBE_FIRST_SEC: number;
}): ChannelHealthSettings {
  return {
    faultsToDisable: c.CHANNEL_FAULTS_TO_DISABLE,
    faultRateToDisable: c.CHANNEL_FAULT_RATE_TO_DISABLE,
    windowMs: c.CHANNEL_FAULT_WINDOW_SEC * 1000,
    minAttempts: c.CHANNEL_FAULT_RATE_MIN_ATTEMPTS,
    flushMs: c.CHANNEL_HEALTH_FLUSH_MS,
    firstProbeSec: c.CHANNEL_PROBE_FIRST_SEC,
  };
}

/** The window is counted in this many buckets (the rate rule's granularity is window / this). */
const WINDOW_BUCKETS = 6;

export const VERDICT = { healthy: 0, consecutive: 1, rate: 2 } as const;

interface PendingSuccesses {
  channel: Channel;
  count: number;
  lastOkMs: number;
}

export interface ChannelHealthDeps {
  redis: Redis;
  keys: RedisKeys;
  sql: Sql;
  settings: ChannelHealthSettings;
  log: Logger;
  metrics: ChannelMetrics;
  /** Announces the channel's change to every relay (the channel invalidation message). */
  announce(channelId: number): Promise<void>;
  now?: () => number;
}

export class ChannelHealth {
  readonly #deps: ChannelHealthDeps;
  readonly #record: RecordOutcomeFn;
  readonly #now: () => number;
  /** Successes not yet reported, per channel; the entries are reused from flush to flush. */
  readonly #pending = new Map<number, PendingSuccesses>();
  #timer: NodeJS.Timeout | null = null;
  #flushing: Promise<void> | null = null;

  constructor(deps: ChannelHealthDeps) {
    this.#deps = deps;
    this.#record = recordChannelOutcomeScript(deps.redis);
    this.#now = deps.now ?? Date.now;
  }

  start(): void {
    if (this.#timer) return;
    this.#timer = setInterval(() => void this.flush(), this.#deps.settings.flushMs);
    this.#timer.unref();
  }

  /** Stops the timer and reports what is pending. */
  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    await this.flush();
  }

  /** A provider attempt on the channel succeeded: counted locally, reported by the next flush. */
  succeeded(channel: Channel): void {
    let p = this.#pending.get(channel.id);
    if (p === undefined) this.#pending.set(channel.id, (p = { channel, count: 0, lastOkMs: 0 }));
    p.channel = channel;
    p.count++;
    p.lastOkMs = this.#now();
  }

  /**
   * A channel fault (provider-fault.ts 'channel'): recorded in Redis now; when it crosses the
   * channel's threshold the channel is disabled automatically. Never throws, never awaited by the
   * request: `why` is a stable reason (no provider body, no secret) kept as the status reason.
   */
  faulted(channel: Channel, requestId: string, why: string): Promise<void> {
    return this.#recordFault(channel, requestId, why).catch((err: unknown) => {
      this.#deps.log.warn({ channel: channel.id, err: (err as Error).message }, 'channel fault could not be recorded');
    });
  }

  async #recordFault(channel: Channel, requestId: string, why: string): Promise<void> {
    const rules = this.#rules(channel);
    // This relay's successes not yet reported go with the fault, scored before it: left for the next
    // flush, a channel answering ok, 403, ok, 403… had its 5 faults of one flush interval taken for
    // consecutive, and 20 faults among 100 attempts for a rate of 20 in 20 (review routing).
    const pending = this.#pending.get(channel.id);
    const successes = pending?.count ?? 0;
    const lastOkMs = successes > 0 ? pending!.lastOkMs : 0;
    if (pending !== undefined) pending.count = 0;
    const [verdict, consecutive, attempts, faults] = await this.#call(channel, 1, successes, lastOkMs, requestId, rules);
    if (verdict === VERDICT.healthy || !channel.health.autoBan) return;
    const rule = verdict === VERDICT.consecutive
      ? `${consecutive} consecutive channel faults`
      : `channel faults in ${faults} of ${attempts} attempts over ${Math.round(this.#deps.settings.windowMs / 1000)} s`;
    await this.#disable(channel, `${rule}; last: ${why}`);
  }

  async #disable(channel: Channel, reason: string): Promise<void> {
    const { sql, settings, log, metrics } = this.#deps;
    const changed = await disableAutomatically(sql, channel.id, reason, Math.floor(this.#now() / 1000), settings.firstProbeSec);
    // Another relay got there first, an administrator disabled it, or it opted out: nothing to say.
    if (!changed) return;
    metrics.statusChanged(channel.id, 'auto_disabled');
    log.warn({ channel: channel.id, name: changed.name, reason }, 'channel disabled automatically');
    await this.#deps.announce(channel.id);
  }

  /** Reports the pending successes, one script call per channel; a failed call's successes are dropped. */
  flush(): Promise<void> {
    if (this.#flushing) return this.#flushing;
    if (this.#pending.size === 0) return Promise.resolve();
    const batch: PendingSuccesses[] = [];
    for (const [id, p] of this.#pending) {
      // Idle for a whole flush: leaves the map, which so holds only the channels in use.
      if (p.count === 0) {
        this.#pending.delete(id);
        continue;
      }
      batch.push({ ...p });
      p.count = 0;
    }
    this.#flushing = Promise.all(batch.map((b) =>
      this.#call(b.channel, 0, b.count, b.lastOkMs, '', this.#rules(b.channel)).catch((err: unknown) => {
        this.#deps.metrics.flushFailures.inc();
        this.#deps.log.debug({ channel: b.channel.id, err: (err as Error).message }, 'channel successes could not be reported');
      }),
    )).then(() => {
      this.#flushing = null;
    });
    return this.#flushing;
  }

  #rules(channel: Channel): { consecutive: number; rate: number } {
    const s = this.#deps.settings;
    if (!channel.health.autoBan) return { consecutive: 0, rate: 0 };
    return {
      consecutive: channel.health.faultThreshold ?? s.faultsToDisable,
      rate: channel.health.faultRateThreshold ?? s.faultRateToDisable,
    };
  }

  #call(channel: Channel, faults: number, successes: number, lastOkMs: number, member: string, rules: { consecutive: number; rate: number }) {
    const { keys, settings } = this.#deps;
    return this.#record(
      keys.channelFaults(channel.id), keys.channelOutcomes(channel.id),
      this.#now(), faults, successes, lastOkMs, channel.health.epochMs, member || '-',
      rules.consecutive, rules.rate, settings.windowMs, settings.minAttempts, Math.max(1, Math.ceil(settings.windowMs / WINDOW_BUCKETS)),
    );
  }
}
