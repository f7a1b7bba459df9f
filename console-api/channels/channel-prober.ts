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
   * flight is abandoned unrecorded (its channel, claimed, is simply due again later, as after a
   * prober that died), and the notices of the round not yet sent are logged as not sent.
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
    for (const channel of due) {
      if (this.#stopping.signal.aborted) return;
      await this.#probeOne(channel);
    }
    if (this.#stopping.signal.aborted) return;
    await this.#notify();
  }

  /** Claims the due channels: their next probe is pushed as if this one failed, in the same statement. */
  async #claimDue(): Promise<DueChannel[]> {
    const { sql, settings } = this.#deps;
    const now = this.#deps.now();
    const rows = await sql<DueChannel[]>`
      WITH due AS (
        SELECT id FROM channels
        WHERE status = ${CHANNEL_STATUS.autoDisabled} AND next_probe_time <= ${now}
        ORDER BY next_probe_time LIMIT ${PROBES_PER_TICK}
        FOR UPDATE SKIP LOCKED)
      UPDATE channels c SET next_probe_time = ${now} + LEAST(${settings.maxProbeSec}::bigint,
                              ${settings.firstProbeSec}::bigint * power(2, LEAST(c.probe_failures + 1, 30))::bigint)
      FROM due WHERE c.id = due.id
      RETURNING c.id, c.name, c.type, c.base_url, c.key_ciphertext, c.models, c.model_mapping, c.probe_failures`;
    return rows.map((r) => ({ ...r, id: Number(r.id), type: Number(r.type), probe_failures: Number(r.probe_failures) }));
  }

  async #probeOne(channel: DueChannel): Promise<void> {
    const { sql, log } = this.#deps;
    const outcome = await this.probe(channel);
    // Stopped mid-probe: nothing was learnt about the channel.
    if (this.#stopping.signal.aborted) return;
    const now = this.#deps.now();
    if (!outcome.ok) {
      await sql`
        UPDATE channels SET probe_time = ${now}, probe_result = ${outcome.result}, probe_failures = probe_failures + 1
        WHERE id = ${channel.id}`;
      log.info({ channel: channel.id, result: outcome.result }, 'channel probe failed; channel stays disabled');
      return;
    }
    await sql`UPDATE channels SET probe_time = ${now}, probe_result = ${outcome.result} WHERE id = ${channel.id}`;
    const changed = await reenableAfterProbe(sql, channel.id, 'enabled again by a successful probe', now);
    if (!changed) return;
    log.warn({ channel: channel.id, name: channel.name }, 'channel enabled again after a successful probe');
    await this.#deps.invalidate({ kind: 'channel', id: channel.id });
  }

  /** One probe of one channel: never throws. */
  async probe(channel: Omit<DueChannel, 'probe_failures'>): Promise<ProbeOutcome> {
    const requested = channel.models.split(',').map((m) => m.trim()).find(Boolean) ?? '';
    let model = requested;
    try {
      const mapping = channel.model_mapping ? (JSON.parse(channel.model_mapping) as Record<string, unknown>) : {};
      if (typeof mapping[requested] === 'string' && mapping[requested]) model = mapping[requested] as string;
    } catch {
      // An unreadable mapping: the requested name, as the relay would send it.
    }
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
    for (const c of changes) {
      if (this.#stopping.signal.aborted) {
        // Claimed above (a notice is sent at most once): said here, as a failed POST would be.
        log.warn({ channel: Number(c.id) }, 'channel health webhook not sent: the prober is stopping');
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
        const failure = exchange.timedOut ? timedOut(settings.timeoutMs) : this.#stopping.signal.aborted ? 'the prober is stopping' : connectionFailure(err);
        log.warn({ channel: notice.channel.id, err: failure }, 'channel health webhook could not be sent');
      } finally {
        exchange.end();
      }
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
