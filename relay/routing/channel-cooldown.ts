// A channel whose provider keeps failing to serve (no connection, no answer within the headers
// timeout, a 5xx or 529) is set aside by this relay for a while:
// the picks of its routes go to the other channels first. Without it, cache affinity
// (affinity.ts) sent the same users to such a channel request after request: a provider that accepts
// and never answers gave them a 504 after the headers timeout every time (that request cannot be
// retried: it may be generating), and one that answers 5xx cost each of their requests a round trip
// first, while neither is ever disabled (a timeout or a 5xx is no fault of the channel's credential:
// channel-health.ts disables on those only).
//
// Kept in memory by each relay, no Redis read on a pick: it decides only the order channels are tried
// in, never whether one serves. A channel set aside is still picked when no other is left. When its
// time is out the next pick tries it again; a success clears it, one more failure sets it aside for
// twice as long, up to the maximum. The relay that sets a channel aside announces it (relay/server.ts,
// the invalidation channel's `channel_aside`) and the others apply it (setAside): with N relays a
// failing provider costs the fleet its failures once, not N times.

export interface CooldownSettings {
  /** Failures in a row (on this relay) that set a channel aside; 0: never. */
  failures: number;
  /** First time aside, ms; doubled after each failure once it is back, up to maxMs. */
  ms: number;
  maxMs: number;
}

export const COOLDOWN_OFF: CooldownSettings = { failures: 0, ms: 0, maxMs: 0 };

interface CooldownState {
  /** Failures in a row since the last success (or since the channel came back). */
  failures: number;
  /** Unix ms until which the channel is set aside (0: it is not). */
  until: number;
  /** Time aside of the next setting aside. */
  nextMs: number;
}

export class ChannelCooldown {
  readonly #settings: CooldownSettings;
  readonly #now: () => number;
  readonly #onSetAside: (channelId: number, ms: number) => void;
  readonly #state = new Map<number, CooldownState>();
  /** The latest `until` of any channel: past it none is aside, whatever the map holds. */
  #anyUntil = 0;

  constructor(settings: CooldownSettings, onSetAside: (channelId: number, ms: number) => void = () => {}, now: () => number = Date.now) {
    this.#settings = settings;
    this.#onSetAside = onSetAside;
    this.#now = now;
  }

  /** Whether some channel may be aside now: the picks' fast path (no clock read while none ever was). */
  get active(): boolean {
    return this.#anyUntil !== 0 && this.#anyUntil > this.#now();
  }

  /** Whether the channel is set aside now. */
  isAside(channelId: number): boolean {
    const s = this.#state.get(channelId);
    return s !== undefined && s.until > this.#now();
  }

  /** An attempt on the channel failed to be served (see the top of this file for which failures). */
  failed(channelId: number): void {
    const { failures, ms, maxMs } = this.#settings;
    if (failures <= 0) return;
    let s = this.#state.get(channelId);
    if (s === undefined) this.#state.set(channelId, (s = { failures: 0, until: 0, nextMs: ms }));
    const now = this.#now();
    // Requests sent before it was set aside, failing now, say nothing new.
    if (s.until > now) return;
    s.failures++;
    if (s.failures < failures) return;
    s.until = now + s.nextMs;
    this.#anyUntil = Math.max(this.#anyUntil, s.until);
    this.#onSetAside(channelId, s.nextMs);
    s.nextMs = Math.min(s.nextMs * 2, maxMs);
    // Back after its time, one more failure sets it aside again.
    s.failures = failures - 1;
  }

  /**
   * Another relay set the channel aside for `ms`: aside here until then too (never longer than this
   * relay's own maximum: a peer configured otherwise, or a forged message, set a channel aside for a
   * day), and the next failure after it sets it aside again for twice as long.
   */
  setAside(channelId: number, announcedMs: number): void {
    const { failures, maxMs } = this.#settings;
    if (failures <= 0) return;
    const ms = Math.min(announcedMs, maxMs);
    let s = this.#state.get(channelId);
    if (s === undefined) this.#state.set(channelId, (s = { failures: 0, until: 0, nextMs: ms }));
    const until = this.#now() + ms;
    if (until <= s.until) return;
    s.until = until;
    this.#anyUntil = Math.max(this.#anyUntil, until);
    s.nextMs = Math.max(s.nextMs, Math.min(ms * 2, maxMs));
    s.failures = failures - 1;
  }

  /** An attempt on the channel was answered: it is no longer aside, and its count starts over. */
  succeeded(channelId: number): void {
    if (this.#state.size !== 0) this.#state.delete(channelId);
  }
}

/** A `channel_aside` announcement (core/invalidation/invalidation.ts). */
export interface AsideAnnouncement {
  id: number;
  ms: number;
  /** The announcing relay's instance id. */
  from: string | undefined;
}

/**
 * Applies another relay's announcement. A relay's own comes back to it and is ignored: applied after
 * a success had cleared the channel, it set the channel aside again. One for a channel this relay
 * does not serve is ignored too: nothing would ever succeed on that id to clear its entry, so a
 * stream of such announcements grew the map without end (27 MB for 200,000 ids).
 */
export function applyAnnouncedAside(cooldown: ChannelCooldown, channels: { has(channelId: number): boolean }, self: string, a: AsideAnnouncement): void {
  if (a.from === self || !channels.has(a.id)) return;
  cooldown.setAside(a.id, a.ms);
}
