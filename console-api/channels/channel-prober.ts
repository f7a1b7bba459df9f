// The fleet's channel prober and health notifier, run by console-api.
//
// Why here: probing sends a channel's credential to its base_url, which is exactly what the console's
// channel test does, under the same outbound rules (core/net/outbound-guard.ts: no private, loopback or
// link-local target unless ChannelAllowPrivateNetworks); relays never call addresses other than their
// channels', and there are many of them. Why once per fleet: each due channel is claimed in Postgres
// before it is probed (FOR UPDATE SKIP LOCKED, and its next_probe_time pushed past the probe), so two
// console-api processes never probe the same channel, and a prober that dies mid-probe simply leaves
// it due again later, as after a failed probe. No Redis lease is needed.
//
// What it does, every CHANNEL_PROBE_TICK_MS:
// 1. Probes the channels disabled automatically (status 3, never 2: an administrator's decision is
//    not the prober's to undo) whose next probe is due, with the cheapest request the provider
//    accepts: count_tokens (free at Anthropic) or, where that endpoint is missing, a Messages call of
//    max_tokens 1; an OpenAI-format channel (type 1), a Chat Completions call of one output token
//    with its key as a Bearer token (core/channels/output-limit.ts). Each probe is written to the channel's row (probe_time, probe_result); a good one
//    re-enables the channel (core/channels/channel-status.ts) and announces it to the relays, a bad
//    one doubles the wait: CHANNEL_PROBE_FIRST_SEC after the disabling, then 2×, 4×, ... up to
//    CHANNEL_PROBE_MAX_SEC.
// 2. Sends the operator webhook (CHANNEL_HEALTH_WEBHOOK_URL) for each automatic status change not yet
//    notified (status_time > status_notified_time): disabled by a relay, re-enabled by a probe. The
//    row is marked before the POST, so a notice is sent at most once; a failed POST is logged.
// stop() ends the round without waiting for its upstream or receiver, and gives back what the round
// claimed but did not finish: the channels not probed (or whose probe it cut) get their previous
// next_probe_time again, and the notices not sent (or whose POST it cut: at worst sent twice) are
// pending again, so the next process probes and sends them.
import { beforeDeadline } from '../../core/net/before-deadline.js';
import { request as httpRequest, type Dispatcher } from 'undici';
import { classifyProviderError } from '../../core/channels/provider-fault.js';
import { CHANNEL_STATUS, reenableAfterProbe } from '../../core/channels/channel-status.js';
import type { Invalidation } from '../../core/invalidation/invalidation.js';
import type { Logger } from '../../infra/logger.js';
import type { Sql } from '../../infra/postgres/client.js';
import type { ApiKeyCrypto } from '../../infra/secrets/api-key-crypto.js';
import { checkTarget, guardedAgent, PRIVATE_TARGET } from '../../core/net/outbound-guard.js';
import { oneTokenRequest, OPENAI_CHANNEL_TYPE } from '../../core/channels/output-limit.js';
import { mappedModel } from '../../core/channels/model-mapping.js';
import { providerErrorType, readHead } from './provider-answer.js';

export interface ProberSettings {
  firstProbeSec: number;
  maxProbeSec: number;
  tickMs: number;
  /**
   * Longest wait of one probe (both of its calls, when count_tokens is missing) or one webhook POST:
   * one deadline for the whole exchange, the reading of the answer included.
   */
  timeoutMs: number;
  /** '' = no webhook. */
  webhookUrl: string;
}

export interface ProberDeps {
  sql: Sql;
  crypto: ApiKeyCrypto;
  log: Logger;
  settings: ProberSettings;
  /** Whether the root option ChannelAllowPrivateNetworks is on (read at each use). */
  privateNetworksAllowed(): Promise<boolean>;
  invalidate(message: Invalidation): Promise<void>;
  /** Unix seconds. */
  now(): number;
}

/** Channels probed per tick at most: a fleet-wide outage must not turn into a burst of probes. */
const PROBES_PER_TICK = 16;
const NOTICES_PER_TICK = 32;
/** Of a webhook receiver's answer, at most this much is read (and discarded). */
const WEBHOOK_ANSWER_LIMIT_BYTES = 16 * 1024;

/** Wait before the probe that follows `failures` failed ones. */
export function probeDelaySec(failures: number, s: Pick<ProberSettings, 'firstProbeSec' | 'maxProbeSec'>): number {
  return Math.min(s.maxProbeSec, s.firstProbeSec * 2 ** Math.min(failures, 30));
}

interface DueChannel {
  id: number;
  name: string;
  type: number;
  base_url: string;
  key_ciphertext: Buffer;
  models: string;
  model_mapping: string;
  probe_failures: number;
}

/** A channel a round claimed: its next_probe_time before the claim, and as the claim set it. */
interface ClaimedChannel extends DueChannel {
  previous_probe_time: number;
  claimed_probe_time: number;
}

export interface ProbeOutcome {
  ok: boolean;
  /** Stable text for the channel's record: `ok`, `HTTP 401 authentication_error`, `ECONNREFUSED`. */
  result: string;
}

export class ChannelProber {
  readonly #deps: ProberDeps;
  readonly #guarded = guardedAgent();
  #timer: NodeJS.Timeout | null = null;
  #running: Promise<void> | null = null;
  /** Aborted by stop(): ends the exchange in flight at once, and the round with it. */
  readonly #stopping = new AbortController();

  constructor(deps: ProberDeps) {
    this.#deps = deps;
  }

  start(): void {
    if (this.#timer) return;
    this.#timer = setInterval(() => void this.tick(), this.#deps.settings.tickMs);
    this.#timer.unref();
  }

  /**
   * Stops the timer and ends the round in progress without waiting for its upstream: the probe in
   * flight is abandoned unrecorded, and it and the channels claimed behind it get their previous
   * next_probe_time back (due as before the round); the notices of the round not yet sent, and the
   * one whose POST was cut, are made pending again for the next process.
   */
  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    this.#stopping.abort(new Error('the channel prober is stopping'));
    await this.#running;
    // destroy, not close: close would wait for a request still in flight.
    await this.#guarded.destroy();
  }

  /** One round: due probes, then pending notices. Overlapping calls share the round in progress. */
  tick(): Promise<void> {
    if (this.#stopping.signal.aborted) return Promise.resolve();
    this.#running ??= this.#round()
      .catch((err: unknown) => this.#deps.log.error({ err }, 'channel prober round failed'))
      .finally(() => {
        this.#running = null;
      });
    return this.#running;
  }

  async #round(): Promise<void> {
    const due = await this.#claimDue();
    // One after another, each within its own deadline (timeoutMs): a slow upstream delays the
    // channels behind it by at most that.
    for (let i = 0; i < due.length; i++) {
      if (this.#stopping.signal.aborted || !(await this.#probeOne(due[i]!))) {
        await this.#unclaim(due.slice(i));
        return;
      }
    }
    if (this.#stopping.signal.aborted) return;
    await this.#notify();
  }

  /**
   * Stopped mid-round: the claimed channels not probed (the one in flight included) get their
   * next_probe_time from before the claim, unless something moved it since.
   */
  async #unclaim(channels: ClaimedChannel[]): Promise<void> {
    if (channels.length === 0) return;
    const { sql, log } = this.#deps;
    try {
      await sql`
        UPDATE channels c SET next_probe_time = u.previous
        FROM unnest(${channels.map((c) => c.id)}::bigint[], ${channels.map((c) => c.previous_probe_time)}::bigint[],
                    ${channels.map((c) => c.claimed_probe_time)}::bigint[]) AS u(id, previous, claimed)
        WHERE c.id = u.id AND c.next_probe_time = u.claimed`;
    } catch (err) {
      log.warn({ err, channels: channels.map((c) => c.id) }, 'channel prober stopping: the claimed channels keep the later probe time');
    }
  }

  /** Claims the due channels: their next probe is pushed as if this one failed, in the same statement. */
  async #claimDue(): Promise<ClaimedChannel[]> {
    const { sql, settings } = this.#deps;
    const now = this.#deps.now();
    const rows = await sql<ClaimedChannel[]>`
      WITH due AS (
        SELECT id, next_probe_time AS previous_probe_time FROM channels
        WHERE status = ${CHANNEL_STATUS.autoDisabled} AND next_probe_time <= ${now}
        ORDER BY next_probe_time LIMIT ${PROBES_PER_TICK}
        FOR UPDATE SKIP LOCKED)
      UPDATE channels c SET next_probe_time = ${now} + LEAST(${settings.maxProbeSec}::bigint,
                              ${settings.firstProbeSec}::bigint * power(2, LEAST(c.probe_failures + 1, 30))::bigint)
      FROM due WHERE c.id = due.id
      RETURNING c.id, c.name, c.type, c.base_url, c.key_ciphertext, c.models, c.model_mapping, c.probe_failures,
        due.previous_probe_time, c.next_probe_time AS claimed_probe_time`;
    return rows.map((r) => ({
      ...r, id: Number(r.id), type: Number(r.type), probe_failures: Number(r.probe_failures),
      previous_probe_time: Number(r.previous_probe_time), claimed_probe_time: Number(r.claimed_probe_time),
    }));
  }

  /** false: stopped mid-probe, nothing recorded. */
  async #probeOne(channel: DueChannel): Promise<boolean> {
    const { sql, log } = this.#deps;
    const outcome = await this.probe(channel);
    // Stopped mid-probe: nothing was learnt about the channel.
    if (this.#stopping.signal.aborted) return false;
    const now = this.#deps.now();
    if (!outcome.ok) {
      await sql`
        UPDATE channels SET probe_time = ${now}, probe_result = ${outcome.result}, probe_failures = probe_failures + 1
        WHERE id = ${channel.id}`;
      log.info({ channel: channel.id, result: outcome.result }, 'channel probe failed; channel stays disabled');
      return true;
    }
    await sql`UPDATE channels SET probe_time = ${now}, probe_result = ${outcome.result} WHERE id = ${channel.id}`;
    const changed = await reenableAfterProbe(sql, channel.id, 'enabled again by a successful probe', now);
    if (!changed) return true;
    log.warn({ channel: channel.id, name: channel.name }, 'channel enabled again after a successful probe');
    await this.#deps.invalidate({ kind: 'channel', id: channel.id });
    return true;
  }

  /** One probe of one channel: never throws. */
  async probe(channel: Omit<DueChannel, 'probe_failures'>): Promise<ProbeOutcome> {
    const requested = channel.models.split(',').map((m) => m.trim()).find(Boolean) ?? '';
    const model = mappedModel(channel.model_mapping, requested);
    let key: string;
    try {
      key = this.#deps.crypto.open(channel.key_ciphertext);
    } catch {
      return { ok: false, result: 'credential cannot be opened with KEY_SECRET' };
    }
    // One deadline for the whole probe: undici's headersTimeout and bodyTimeout are idle timeouts (an
    // upstream sending one byte every few seconds never meets them); this signal ends the lookup, the
    // connections, the waits for headers and the reading of the bodies alike. stop() ends it too.
    const timeout = this.#deps.settings.timeoutMs;
    const exchange = new Exchange(timeout, this.#stopping.signal);
    const { signal } = exchange;
    try {
      const allowPrivate = await this.#deps.privateNetworksAllowed();
      // Address literals are checked here; names again by the guarded agent's own lookup.
      if (!allowPrivate) await beforeDeadline(checkTarget(channel.base_url), signal);
      const dispatcher = allowPrivate ? undefined : this.#guarded;
      // The cheapest generation in the channel's format: Chat Completions with a Bearer key for an
      // OpenAI-format channel (max_completion_tokens for a reasoning model), else Messages.
      const generate = oneTokenRequest(channel.type, channel.base_url, key, model, 'ping');
      if (channel.type === OPENAI_CHANNEL_TYPE) return await this.#call(dispatcher, signal, generate.url, generate.headers, generate.body);
      const headers = { 'content-type': 'application/json', 'x-api-key': key, 'anthropic-version': '2023-06-01' };
      const counted = await this.#call(dispatcher, signal, `${channel.base_url}/v1/messages/count_tokens`, headers,
        JSON.stringify({ model, messages: [{ role: 'user', content: 'ping' }] }));
      // A provider without count_tokens: the cheapest generation instead.
      if (counted.result.startsWith('HTTP 404') || counted.result.startsWith('HTTP 405')) {
        return await this.#call(dispatcher, signal, generate.url, generate.headers, generate.body);
      }
      return counted;
    } catch (err) {
      if (exchange.timedOut) return { ok: false, result: timedOut(timeout) };
      if (this.#stopping.signal.aborted) return { ok: false, result: 'stopped' };
      return { ok: false, result: connectionFailure(err) };
    } finally {
      exchange.end();
    }
  }

  async #call(dispatcher: Dispatcher | undefined, signal: AbortSignal, url: string, headers: Record<string, string>, body: string): Promise<ProbeOutcome> {
    const timeout = this.#deps.settings.timeoutMs;
    const res = await httpRequest(url, {
      method: 'POST',
      headers,
      body,
      headersTimeout: timeout,
      bodyTimeout: timeout,
      signal,
      ...(dispatcher ? { dispatcher } : {}),
    });
    // The signal ends this read too.
    const text = await readHead(res.body, 16 * 1024);
    if (res.statusCode >= 200 && res.statusCode < 300) return { ok: true, result: 'ok' };
    const type = providerErrorType(text);
    return { ok: false, result: `HTTP ${res.statusCode}${type ? ` ${type}` : ''} (${classifyProviderError(res.statusCode, text)})` };
  }

  /** Sends the webhook for the automatic status changes not yet notified (at most once each). */
  async #notify(): Promise<void> {
    const { sql, settings, log } = this.#deps;
    const changes = await sql<{ id: number; name: string; status: number; status_reason: string; status_time: number }[]>`
      WITH pending AS (
        SELECT id FROM channels WHERE status_time > status_notified_time
        ORDER BY status_time LIMIT ${NOTICES_PER_TICK} FOR UPDATE SKIP LOCKED)
      UPDATE channels c SET status_notified_time = c.status_time
      FROM pending WHERE c.id = pending.id
      RETURNING c.id, c.name, c.status, c.status_reason, c.status_time`;
    if (!settings.webhookUrl) return;
    // Claimed above but not sent because stop() came: given back after the loop.
    const unsent: { id: number; status_time: number }[] = [];
    for (const c of changes) {
      if (this.#stopping.signal.aborted) {
        unsent.push({ id: Number(c.id), status_time: Number(c.status_time) });
        continue;
      }
      const notice = {
        event: Number(c.status) === CHANNEL_STATUS.enabled ? 'channel_enabled' : 'channel_disabled',
        channel: { id: Number(c.id), name: c.name },
        status: Number(c.status),
        reason: c.status_reason,
        time: Number(c.status_time),
      };
      // One deadline for the whole POST, as for a probe; stop() ends it too.
      const exchange = new Exchange(settings.timeoutMs, this.#stopping.signal);
      const { signal } = exchange;
      try {
        const allowPrivate = await this.#deps.privateNetworksAllowed();
        if (!allowPrivate) await beforeDeadline(checkTarget(settings.webhookUrl), signal);
        const res = await httpRequest(settings.webhookUrl, {
          method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(notice),
          headersTimeout: settings.timeoutMs, bodyTimeout: settings.timeoutMs, signal,
          ...(allowPrivate ? {} : { dispatcher: this.#guarded }),
        });
        // The status is the answer; the body is only discarded, at most WEBHOOK_ANSWER_LIMIT_BYTES of
        // it, within what is left of the deadline (a longer or slower one is cut off, which changes nothing).
        await res.body.dump({ limit: WEBHOOK_ANSWER_LIMIT_BYTES, signal }).catch(() => undefined);
        if (res.statusCode >= 300) log.warn({ channel: notice.channel.id, status: res.statusCode }, 'channel health webhook answered an error');
      } catch (err) {
        if (!exchange.timedOut && this.#stopping.signal.aborted) {
          // Cut by stop(): perhaps received, perhaps not; sent again by the next process (at worst twice).
          unsent.push({ id: notice.channel.id, status_time: notice.time });
        } else {
          log.warn({ channel: notice.channel.id, err: exchange.timedOut ? timedOut(settings.timeoutMs) : connectionFailure(err) },
            'channel health webhook could not be sent');
        }
      } finally {
        exchange.end();
      }
    }
    if (unsent.length > 0) await this.#giveBackNotices(unsent);
  }

  /**
   * Stopped mid-round: the notices claimed but not sent are pending again (status_notified_time
   * below status_time), unless the channel's status changed since (then it is pending anyway).
   */
  async #giveBackNotices(unsent: { id: number; status_time: number }[]): Promise<void> {
    const { sql, log } = this.#deps;
    const ids = unsent.map((u) => u.id);
    try {
      await sql`
        UPDATE channels c SET status_notified_time = 0
        FROM unnest(${ids}::bigint[], ${unsent.map((u) => u.status_time)}::bigint[]) AS u(id, status_time)
        WHERE c.id = u.id AND c.status_time = u.status_time AND c.status_notified_time = u.status_time`;
      log.warn({ channels: ids }, 'channel health webhook not sent: the prober is stopping; the notices are pending again for the next process');
    } catch (err) {
      log.warn({ err, channels: ids }, 'channel health webhook not sent: the prober is stopping, and the notices could not be given back');
    }
  }
}

/**
 * The signal of one outbound exchange: aborted at its deadline or when the prober stops. (Not
 * AbortSignal.any with the prober's long-lived stop signal: end() unlinks the two, nothing is kept.)
 */
class Exchange {
  readonly #controller = new AbortController();
  readonly #stop: AbortSignal;
  readonly #timer: NodeJS.Timeout;
  readonly #onStop = () => this.#controller.abort(this.#stop.reason);
  /** Whether the deadline, not stop(), ended it. */
  timedOut = false;

  constructor(ms: number, stop: AbortSignal) {
    this.#stop = stop;
    this.#timer = setTimeout(() => {
      this.timedOut = true;
      this.#controller.abort(new Error(timedOut(ms)));
    }, ms);
    if (stop.aborted) this.#onStop();
    else stop.addEventListener('abort', this.#onStop, { once: true });
  }

  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  end(): void {
    clearTimeout(this.#timer);
    this.#stop.removeEventListener('abort', this.#onStop);
  }
}

/** The record of an exchange cut off by its deadline. */
function timedOut(ms: number): string {
  return `timed out (no complete answer within ${ms} ms)`;
}

/** A connection failure as a stable code, never its text (addresses); a refused private target says so. */
function connectionFailure(err: unknown): string {
  for (let e = err, i = 0; e && i < 5; e = (e as { cause?: unknown }).cause, i++) {
    if ((e as { code?: unknown }).code === PRIVATE_TARGET) return 'refused: private, loopback or link-local target';
  }
  const code = (err as { code?: unknown })?.code;
  return typeof code === 'string' && /^[A-Z][A-Z0-9_]{1,47}$/.test(code) ? code : 'connection failed';
}
